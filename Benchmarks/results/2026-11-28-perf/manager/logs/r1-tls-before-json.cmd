$BASE/hawser-manager-load --serializer json --cacert $RESULTS/manager/pki/ca.pem -c 1 -n 1250 https://127.0.0.1:59495/json
