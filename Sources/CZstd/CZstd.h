// zstd (libzstd; Debian: libzstd-dev), for HawserCoding under the trait "Zstd". The library
// uses the streaming decoder; the tests and fuzz targets use the encoder of the same library.
#pragma once
#include <zstd.h>
#include <zstd_errors.h>
