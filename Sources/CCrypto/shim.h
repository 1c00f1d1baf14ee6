// CCrypto: OpenSSL's libcrypto (Debian 12: 3.0; Debian 13: 3.5), already in
// the dependency tree through libmosquitto's TLS. Used for Ed25519
// (EVP_PKEY_ED25519), SHA-256 and random nonces only: no hand-written cryptography.
#pragma once
#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
