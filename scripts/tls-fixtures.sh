#!/usr/bin/env bash
# Writes the TLS test certificates into test/fixtures/tls/ (see its SOURCE.md). Run by hand,
# from the repository root: bash scripts/tls-fixtures.sh. The tests read the files; they never
# run openssl. Every certificate is EC P-256 (fast handshakes) and valid for 100 years.
set -euo pipefail

out=test/fixtures/tls
days=36500
mkdir -p "$out"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

key() { openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$1"; }

# A self-signed CA: $1 file stem, $2 common name. Its key is thrown away with the work folder:
# a new certificate means running this script again, which replaces them all.
ca() {
  key "$work/$1-key.pem"
  openssl req -x509 -new -key "$work/$1-key.pem" -subj "/CN=$2" -days "$days" -sha256 \
    -addext 'basicConstraints=critical,CA:TRUE' -addext 'keyUsage=critical,keyCertSign,cRLSign' \
    -out "$out/$1.pem"
}

# A leaf certificate: $1 file stem, $2 common name, $3 signing CA's stem, $4 extensions.
leaf() {
  key "$out/$1-key.pem"
  openssl req -new -key "$out/$1-key.pem" -subj "/CN=$2" -out "$work/$1.csr"
  printf '%s\n' "$4" >"$work/$1.ext"
  openssl x509 -req -in "$work/$1.csr" -CA "$out/$3.pem" -CAkey "$work/$3-key.pem" -CAcreateserial \
    -CAserial "$work/$3.srl" -days "$days" -sha256 -extfile "$work/$1.ext" -out "$out/$1.pem"
}

SERVER='basicConstraints=CA:FALSE
keyUsage=critical,digitalSignature
extendedKeyUsage=serverAuth
subjectAltName=DNS:localhost,IP:127.0.0.1,IP:::1'
CLIENT='basicConstraints=CA:FALSE
keyUsage=critical,digitalSignature
extendedKeyUsage=clientAuth'

# A self-signed server certificate, as a user makes one with `openssl req -x509`: its own trust
# anchor (what serve's start-up commands pass to curl --cacert and bench --tls-ca).
self_signed() {
  key "$out/$1-key.pem"
  openssl req -x509 -new -key "$out/$1-key.pem" -subj "/CN=$2" -days "$days" -sha256 \
    -addext 'subjectAltName=DNS:localhost,IP:127.0.0.1,IP:::1' -out "$out/$1.pem"
}

ca ca 'batchserve test CA'
ca other-ca 'batchserve unrelated test CA'
leaf server 'batchserve test server' ca "$SERVER"
# The same names under another key: what a renewal swaps in (the SIGHUP reload test).
leaf server-renewed 'batchserve test server (renewed)' ca "$SERVER"
leaf client 'batchserve test client' ca "$CLIENT"
leaf other-client 'batchserve unrelated test client' other-ca "$CLIENT"
self_signed self-signed 'batchserve self-signed test server'
chmod 644 "$out"/*.pem
ls "$out"
