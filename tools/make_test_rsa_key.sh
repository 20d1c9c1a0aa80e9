#!/usr/bin/env bash
# Writes the RSA key engine/tests/tls.rs makes its RSA certificates with (rcgen on ring signs with RSA keys but
# cannot generate them). Run again to replace it; the tests make their certificates from it at each run.
set -euo pipefail
cd "$(dirname "$0")/.."
openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048 -out engine/tests/tls/rsa-2048.key
