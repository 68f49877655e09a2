Benchmarks/.build/release/hawser-load --session  -c 1 -n 5000 http://127.0.0.1:49357/json
