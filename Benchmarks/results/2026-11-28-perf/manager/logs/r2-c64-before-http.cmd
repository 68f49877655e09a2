$BASE/hawser-manager-load --serializer http  -c 64 -n 25000 http://127.0.0.1:49357/hello
