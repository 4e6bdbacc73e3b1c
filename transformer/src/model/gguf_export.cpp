// SPDX-License-Identifier: Apache-2.0
// A GGUF copy with per-layer sliding windows (see bosch/model/gguf_export.hpp).

#include <bosch/error.hpp>
#include <bosch/io/atomic_file.hpp>
#include <bosch/model/config.hpp>
#include <bosch/model/gguf_export.hpp>
#include <bosch/model/loader.hpp>
#include <bosch/model/mapped_file.hpp>

#include <cstring>
#include <unordered_map>

namespace bosch::model {

namespace {

std::uint64_t scalar_bytes(gguf::ValueType t) {
  using V = gguf::ValueType;
  switch (t) {
    case V::u8:
    case V::i8:
    case V::boolean: return 1;
    case V::u16:
    case V::i16: return 2;
    case V::u32:
    case V::i32:
    case V::f32: return 4;
    case V::u64:
    case V::i64:
    case V::f64: return 8;
    default: return 0;
  }
}

/// Walks the raw bytes of a GGUF file that gguf::File has already validated,
/// bounds-checked all the same.
struct Walker {
  std::span<const std::byte> b;
  std::string where;
  std::uint64_t pos = 0;

  void need(std::uint64_t n) const {
    if (n > b.size() - pos) throw format_error("truncated at offset " + std::to_string(pos), where);
  }
  template <class T>
  T read() {
    need(sizeof(T));
    T v;
    std::memcpy(&v, b.data() + pos, sizeof(T));
    pos += sizeof(T);
    return v;
  }
  std::string string() {
    const auto n = read<std::uint64_t>();
    need(n);
    std::string s(reinterpret_cast<const char*>(b.data() + pos), static_cast<std::size_t>(n));
    pos += n;
    return s;
  }
  void skip_value(gguf::ValueType t) {
    if (t == gguf::ValueType::string) {
      string();
    } else if (t == gguf::ValueType::array) {
      const auto et = static_cast<gguf::ValueType>(read<std::uint32_t>());
      const auto n = read<std::uint64_t>();
      if (et == gguf::ValueType::string) {
        for (std::uint64_t i = 0; i < n; ++i) string();
      } else {
        const auto sz = scalar_bytes(et);
        if (sz == 0 || n > (b.size() - pos) / sz) throw format_error("bad array", where);
        pos += n * sz;
      }
    } else {
      const auto sz = scalar_bytes(t);
      if (sz == 0) throw format_error("unknown value type", where);
      need(sz);
      pos += sz;
    }
  }
};

template <class T>
void append(std::string& out, T v) {
  char buf[sizeof(T)];
  std::memcpy(buf, &v, sizeof(T));
  out.append(buf, sizeof(T));
}

void append_pair(std::string& out, const GgufPair& p) {
  append<std::uint64_t>(out, p.key.size());
  out += p.key;
  append<std::uint32_t>(out, static_cast<std::uint32_t>(p.type));
  out.append(reinterpret_cast<const char*>(p.value.data()), p.value.size());
}

}  // namespace

GgufPair GgufPair::u32(std::string key, std::uint32_t v) {
  GgufPair p{std::move(key), gguf::ValueType::u32, std::vector<std::byte>(4)};
  std::memcpy(p.value.data(), &v, 4);
  return p;
}

GgufPair GgufPair::bool_array(std::string key, const std::vector<bool>& v) {
  GgufPair p{std::move(key), gguf::ValueType::array, {}};
  const auto et = static_cast<std::uint32_t>(gguf::ValueType::boolean);
  const auto n = static_cast<std::uint64_t>(v.size());
  p.value.resize(4 + 8 + v.size());
  std::memcpy(p.value.data(), &et, 4);
  std::memcpy(p.value.data() + 4, &n, 8);
  for (std::size_t i = 0; i < v.size(); ++i) p.value[12 + i] = std::byte{v[i] ? std::uint8_t{1} : std::uint8_t{0}};
  return p;
}

std::string gguf_with_metadata(const gguf::File& source, std::span<const std::byte> bytes,
                               const std::vector<GgufPair>& set) {
  Walker w{bytes, source.path().string()};
  w.read<std::uint32_t>();  // magic
  const auto version = w.read<std::uint32_t>();
  const auto n_tensors = w.read<std::uint64_t>();
  const auto n_kv = w.read<std::uint64_t>();
  std::unordered_map<std::string, std::size_t> pending;  // key -> index in `set`
  for (std::size_t i = 0; i < set.size(); ++i) pending.emplace(set[i].key, i);

  std::string kv;
  std::uint64_t count = 0;
  for (std::uint64_t i = 0; i < n_kv; ++i) {
    const std::uint64_t start = w.pos;
    const std::string key = w.string();
    const auto type = static_cast<gguf::ValueType>(w.read<std::uint32_t>());
    w.skip_value(type);
    if (auto it = pending.find(key); it != pending.end()) {
      append_pair(kv, set[it->second]);
      pending.erase(it);
    } else {
      kv.append(reinterpret_cast<const char*>(bytes.data() + start), w.pos - start);
    }
    ++count;
  }
  for (const auto& p : set)
    if (pending.count(p.key)) {
      append_pair(kv, p);
      ++count;
    }
  const std::uint64_t dir_start = w.pos;
  // The tensor directory runs from the end of the metadata to the end of the
  // last tensor info (name, dimension count, dimensions, type, offset); the
  // data section starts at the next multiple of the alignment.
  for (std::uint64_t i = 0; i < n_tensors; ++i) {
    w.string();
    const auto dims = w.read<std::uint32_t>();
    w.need(std::uint64_t{8} * dims + 4 + 8);
    w.pos += std::uint64_t{8} * dims + 4 + 8;
  }
  const std::uint64_t directory_end = w.pos;

  std::string out;
  out.reserve(bytes.size() + kv.size() + 64);
  out.append("GGUF", 4);
  append<std::uint32_t>(out, version);
  append<std::uint64_t>(out, n_tensors);
  append<std::uint64_t>(out, count);
  out += kv;
  out.append(reinterpret_cast<const char*>(bytes.data() + dir_start), directory_end - dir_start);
  const std::uint64_t a = source.alignment();
  out.append(static_cast<std::size_t>((a - out.size() % a) % a), '\0');
  out.append(reinterpret_cast<const char*>(bytes.data() + source.data_offset()),
             bytes.size() - source.data_offset());
  return out;
}

std::optional<GgufWindows> gguf_windows(const gguf::File& f) {
  const std::string arch = f.get_string("general.architecture");
  const std::string wkey = arch + ".attention.sliding_window", pkey = arch + ".attention.sliding_window_pattern";
  if (!f.contains(wkey)) return std::nullopt;
  GgufWindows out;
  out.window = f.get_int32(wkey);
  if (out.window < 1) throw format_error("must be >= 1, got " + std::to_string(out.window), f.where_key(wkey));
  const int layers = f.get_int32(arch + ".block_count");
  if (layers < 1) throw format_error("must be positive", f.where_key(arch + ".block_count"));
  out.swa.assign(static_cast<std::size_t>(layers), true);
  if (const gguf::Value* p = f.find(pkey)) {
    if (p->is_array()) {
      if (p->integers.size() != p->array_size() || p->array_size() != static_cast<std::size_t>(layers))
        throw format_error("expected an array of " + std::to_string(layers) + " bools (one per layer), got " +
                               std::to_string(p->array_size()) + " elements of type " + to_string(p->element_type),
                           f.where_key(pkey));
      for (std::size_t i = 0; i < out.swa.size(); ++i) out.swa[i] = p->integers[i] != 0;
    } else if (p->is_integer()) {
      const auto n = p->integer;
      if (n < 0) throw format_error("negative period", f.where_key(pkey));
      for (std::int64_t i = 0; i < layers; ++i) out.swa[static_cast<std::size_t>(i)] = n == 0 || i % n < n - 1;
    } else {
      throw format_error("expected a bool array or an integer", f.where_key(pkey));
    }
  }
  return out;
}

void write_gguf_windows(const std::filesystem::path& model, const std::filesystem::path& out, const HeadMask& mask,
                        const io::ExportWindows& w) {
  io::check_export_windows(w, out.string());
  const gguf::File f(model);
  const Config c = config_from_gguf(f);
  if (!(mask.layout() == c.layout()))
    throw invalid_argument("mask layout " + to_string(mask.layout()) + " does not fit the model's layout " +
                               to_string(c.layout()),
                           model.string());
  io::check_layer_mask(mask, "gguf", out.string());
  if (w.sinks > 0)
    throw invalid_argument("llama.cpp's sliding windows keep no attention sinks, but the mask uses " +
                               std::to_string(w.sinks) +
                               " (export with sinks 0 to accept the difference, or use --to kvpress or --to layers, "
                               "which carry the sink count)",
                           out.string());
  const std::string arch = f.get_string("general.architecture");
  const MappedFile bytes(model);
  const std::string copy =
      gguf_with_metadata(f, bytes.bytes(),
                         {GgufPair::u32(arch + ".attention.sliding_window", static_cast<std::uint32_t>(w.window)),
                          GgufPair::bool_array(arch + ".attention.sliding_window_pattern", io::swa_layers(mask))});
  io::write_file_atomic(out, copy);
}

}  // namespace bosch::model
