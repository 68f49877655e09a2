Benchmarks/.build/release/hawser-load --session  -c 64 -n 25000 http://127.0.0.1:49357/hello
