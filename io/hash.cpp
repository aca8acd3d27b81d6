#include "io/hash.hpp"

#include <openssl/evp.h>

#include <array>
#include <fstream>
#include <memory>
#include <stdexcept>

#include "io/error.hpp"

namespace lmsim::io {

namespace {

struct Digest {
  std::unique_ptr<EVP_MD_CTX, decltype(&EVP_MD_CTX_free)> ctx{EVP_MD_CTX_new(), &EVP_MD_CTX_free};
  Digest() {
    if (!ctx || EVP_DigestInit_ex(ctx.get(), EVP_sha256(), nullptr) != 1)
      throw std::runtime_error("OpenSSL: cannot start a SHA-256 digest");
  }
  void update(const void* p, std::size_t n) {
    if (n && EVP_DigestUpdate(ctx.get(), p, n) != 1) throw std::runtime_error("OpenSSL: SHA-256 update failed");
  }
  std::string hex() {
    std::array<unsigned char, EVP_MAX_MD_SIZE> md{};
    unsigned int len = 0;
    if (EVP_DigestFinal_ex(ctx.get(), md.data(), &len) != 1) throw std::runtime_error("OpenSSL: SHA-256 failed");
    static const char* digits = "0123456789abcdef";
    std::string out;
    for (unsigned int i = 0; i < len; ++i) {
      out += digits[md[i] >> 4];
      out += digits[md[i] & 15];
    }
    return out;
  }
};

}  // namespace

std::string sha256_hex(std::string_view bytes) {
  Digest d;
  d.update(bytes.data(), bytes.size());
  return d.hex();
}

std::string sha256_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw InputError(path, 0, "", "cannot read the file to hash it");
  Digest d;
  std::array<char, 1 << 16> buf{};
  while (f) {
    f.read(buf.data(), buf.size());
    d.update(buf.data(), static_cast<std::size_t>(f.gcount()));
  }
  if (f.bad()) throw InputError(path, 0, "", "read error while hashing");
  return d.hex();
}

}  // namespace lmsim::io
