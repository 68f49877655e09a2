// The brotli decoder (libbrotlidec; Debian: libbrotli-dev), for HawserCoding under the trait
// "Brotli". The encoder's header is here too, for the tests and fuzz targets only: they link
// libbrotlienc themselves; the library never calls the encoder, so it never links it.
#pragma once
#include <brotli/decode.h>
#include <brotli/encode.h>
