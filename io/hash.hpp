// lmsim/io/hash.hpp — SHA-256 digests (OpenSSL) for provenance, fingerprints and checksums.
//
// Owns: the one content hash of the project, as lowercase hex, of a byte string or of a file streamed in blocks.
#pragma once

#include <string>
#include <string_view>

namespace lmsim::io {

// SHA-256 of `bytes`, 64 lowercase hex digits.
std::string sha256_hex(std::string_view bytes);
// SHA-256 of a file's contents, read in blocks; throws InputError naming the file when it cannot be read.
std::string sha256_file(const std::string& path);

}  // namespace lmsim::io
