#!/usr/bin/env bash
# A throw-away PKI for the benchmarks' TLS rows: a P-256 CA and a leaf for localhost and
# 127.0.0.1 (server auth), valid two days.
#   Benchmarks/scripts/bench-pki.sh DIR "CA NAME"   writes DIR/ca.pem, ca.key, leaf.pem, leaf.key
set -euo pipefail
pki="${1:?usage: bench-pki.sh DIR \"CA NAME\"}"
name="${2:-Hawser bench CA}"
command -v openssl >/dev/null || { echo "bench-pki.sh: openssl not found" >&2; exit 1; }
mkdir -p "$pki"
openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$pki/ca.key" 2>/dev/null
openssl req -x509 -new -key "$pki/ca.key" -sha256 -days 2 -subj "/CN=$name" \
    -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign" -out "$pki/ca.pem" 2>/dev/null
openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$pki/leaf.key" 2>/dev/null
openssl req -new -key "$pki/leaf.key" -subj "/CN=localhost" -out "$pki/leaf.csr" 2>/dev/null
printf '%s\n' "subjectAltName=DNS:localhost,IP:127.0.0.1" "basicConstraints=critical,CA:FALSE" \
    "keyUsage=critical,digitalSignature" "extendedKeyUsage=serverAuth" > "$pki/leaf.ext"
openssl x509 -req -in "$pki/leaf.csr" -CA "$pki/ca.pem" -CAkey "$pki/ca.key" -CAcreateserial \
    -days 2 -sha256 -extfile "$pki/leaf.ext" -out "$pki/leaf.pem" 2>/dev/null
