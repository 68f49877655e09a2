$BASE/hawser-manager-load --serializer json  -c 1 -n 5000 http://127.0.0.1:49357/json
