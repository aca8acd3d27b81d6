#include "search/checkpoint.hpp"

#include <cmath>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>

#include "io/error.hpp"
#include "io/hash.hpp"

namespace fs = std::filesystem;

namespace lmsim::search {

namespace {
constexpr const char* kMagic = "lmsim-checkpoint";
constexpr int kVersion = 2;
}  // namespace

std::string checkpoint_path(const std::string& dir, int rank) {
  return (fs::path(dir) / ("rank_" + std::to_string(rank) + ".ckpt")).string();
}

void write_checkpoint(const std::string& path, const CheckpointKey& key, const CheckpointState& state) {
  std::ostringstream o;
  o.precision(17);
  o << kMagic << ' ' << kVersion << ' ' << key.fingerprint << ' ' << key.chunk << ' ' << key.space_size << '\n';
  for (const auto& [id, c] : state.chunk_counts) {
    o << "C " << id;
    for (auto v : c) o << ' ' << v;
    o << '\n';
  }
  for (const auto& e : state.entries)
    o << "E " << e.index << ' ' << e.objective << ' ' << e.time_s << ' ' << e.peak_bytes << '\n';
  const std::string body = o.str();
  const std::string tmp = path + ".tmp";
  {
    std::ofstream f(tmp, std::ios::trunc | std::ios::binary);
    f << body << "SHA256 " << io::sha256_hex(body) << '\n';
    f.flush();
    if (!f) {
      f.close();
      std::error_code ec;
      fs::remove(tmp, ec);
      throw io::InputError(path, 0, "", "cannot write the checkpoint (disk full or not writable?)");
    }
  }
  std::error_code ec;
  fs::rename(tmp, path, ec);
  if (ec) {
    fs::remove(tmp, ec);
    throw io::InputError(path, 0, "", "cannot rename the checkpoint into place");
  }
}

CheckpointState read_checkpoint(const std::string& path, const CheckpointKey& key) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw io::InputError(path, 0, "", "cannot read the checkpoint");
  std::ostringstream all;
  all << f.rdbuf();
  const std::string text = all.str();
  // The checksum line closes the file; anything else is a torn or edited file.
  const auto tail = text.rfind("SHA256 ");
  std::size_t nlines = static_cast<std::size_t>(std::count(text.begin(), text.end(), '\n'));
  auto bad = [&](std::size_t line, const std::string& field, const std::string& why) {
    return io::InputError(path, static_cast<long>(line), field,
                          why + " (remove the checkpoint folder or drop --resume)");
  };
  if (text.rfind(kMagic, 0) != 0) throw bad(1, "", "not an lmsim checkpoint");
  if (tail == std::string::npos || (tail > 0 && text[tail - 1] != '\n'))
    throw bad(nlines, "SHA256", "checkpoint has no checksum line: torn or edited");
  std::string sum = text.substr(tail + 7);
  while (!sum.empty() && (sum.back() == '\n' || sum.back() == '\r')) sum.pop_back();
  const std::string body = text.substr(0, tail);
  if (sum != io::sha256_hex(body)) throw bad(nlines, "SHA256", "checksum mismatch: the checkpoint was corrupted");

  std::istringstream in(body);
  std::string line;
  std::getline(in, line);
  {
    std::istringstream hs(line);
    std::string magic, fp;
    int version = 0;
    std::uint64_t chunk = 0, size = 0;
    hs >> magic >> version >> fp >> chunk >> size;
    if (version != kVersion) throw bad(1, "version", "checkpoint format " + std::to_string(version) + " is not 2");
    if (fp != key.fingerprint || chunk != key.chunk || size != key.space_size)
      throw bad(1, "fingerprint",
                "checkpoint of a different search (model, systems, θ, settings, space or search options differ)");
  }
  CheckpointState st;
  std::vector<Entry> entries;
  const std::uint64_t n_chunks = (key.space_size + key.chunk - 1) / key.chunk;
  std::size_t ln = 1;
  while (std::getline(in, line)) {
    ++ln;
    std::istringstream ls(line);
    std::string tag;
    ls >> tag;
    if (tag == "C") {
      std::uint64_t id = 0;
      Counts c{};
      ls >> id;
      for (auto& v : c) ls >> v;
      if (!ls || id >= n_chunks) throw bad(ln, "chunk", "chunk id out of range or counts missing");
      const std::uint64_t lo = id * key.chunk, hi = std::min(key.space_size, lo + key.chunk);
      std::uint64_t sum_c = 0;
      for (auto v : c) sum_c += v;
      if (sum_c != hi - lo) throw bad(ln, "counts", "counts do not add up to the chunk's length");
      if (!st.chunk_counts.emplace(id, c).second) throw bad(ln, "chunk", "chunk listed twice");
    } else if (tag == "E") {
      Entry e{};
      ls >> e.index >> e.objective >> e.time_s >> e.peak_bytes;
      if (!ls || e.index >= key.space_size) throw bad(ln, "entry", "entry index out of range or values missing");
      if (!std::isfinite(e.objective) || !std::isfinite(e.time_s) || !std::isfinite(e.peak_bytes) || e.objective <= 0 ||
          e.time_s <= 0 || e.peak_bytes <= 0)
        throw bad(ln, "entry", "entry values must be finite and positive");
      entries.push_back(e);
    } else {
      throw bad(ln, "", "unknown line '" + tag + "'");
    }
  }
  for (const auto& e : entries)
    if (!st.chunk_counts.count(e.index / key.chunk))
      throw bad(ln, "entry", "entry " + std::to_string(e.index) + " is not in a completed chunk");
  std::sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) { return a.index < b.index; });
  for (std::size_t i = 0; i < entries.size(); ++i)
    if (i == 0 || entries[i].index != entries[i - 1].index) st.entries.push_back(entries[i]);
  return st;
}

CheckpointState read_checkpoints(const std::string& dir, const CheckpointKey& key) {
  CheckpointState into;
  if (!fs::is_directory(dir)) return into;
  std::map<std::uint64_t, Entry> entries;
  static const std::regex name(R"(rank_[0-9]+\.ckpt)");
  for (const auto& e : fs::directory_iterator(dir)) {
    if (!std::regex_match(e.path().filename().string(), name)) continue;
    CheckpointState part = read_checkpoint(e.path().string(), key);
    for (auto& [id, c] : part.chunk_counts) into.chunk_counts[id] = c;  // a chunk done twice counted the same
    for (auto& en : part.entries) entries[en.index] = en;
  }
  for (auto& [i, en] : entries) into.entries.push_back(en);
  return into;
}

void remove_checkpoints(const std::string& dir) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return;
  static const std::regex ours(R"(rank_[0-9]+\.(ckpt|ckpt\.tmp|records)|lock)");
  for (const auto& e : fs::directory_iterator(dir, ec))
    if (std::regex_match(e.path().filename().string(), ours)) fs::remove(e.path(), ec);
  if (fs::is_empty(dir, ec)) fs::remove(dir, ec);
}

}  // namespace lmsim::search
