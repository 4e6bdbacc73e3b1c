// SPDX-License-Identifier: Apache-2.0
// GGUF reader (see bosch/model/gguf.hpp).

#include <bosch/error.hpp>
#include <bosch/model/gguf.hpp>

#include <bit>
#include <cstring>
#include <limits>
#include <utility>

namespace bosch::model::gguf {

static_assert(std::endian::native == std::endian::little,
              "the GGUF reader assumes a little-endian host");

namespace {

constexpr std::uint64_t max_dims = 4;  // GGML_MAX_DIMS

std::size_t scalar_size(ValueType t) {
  switch (t) {
    case ValueType::u8:
    case ValueType::i8:
    case ValueType::boolean: return 1;
    case ValueType::u16:
    case ValueType::i16: return 2;
    case ValueType::u32:
    case ValueType::i32:
    case ValueType::f32: return 4;
    case ValueType::u64:
    case ValueType::i64:
    case ValueType::f64: return 8;
    case ValueType::string: return 8;  // at least its length field
    case ValueType::array: return 12;  // at least its type and count
  }
  return 0;
}

bool known_value_type(std::uint32_t t) { return t <= static_cast<std::uint32_t>(ValueType::f64); }

/// Bounds-checked little-endian reader over the mapped bytes.
class Cursor {
 public:
  Cursor(std::span<const std::byte> bytes, std::string path)
      : bytes_(bytes), path_(std::move(path)) {}

  std::uint64_t pos() const noexcept { return pos_; }
  std::uint64_t remaining() const noexcept { return bytes_.size() - pos_; }

  [[noreturn]] void fail(const std::string& message, const std::string& field) const {
    throw format_error(message, path_ + ": " + field);
  }

  /// Ensures `n` more bytes exist; `field` names what was being read.
  void need(std::uint64_t n, const std::string& field) const {
    if (n > remaining())
      fail("truncated: needs " + std::to_string(n) + " bytes at offset " + std::to_string(pos_) +
               ", file has " + std::to_string(bytes_.size()),
           field);
  }

  template <class T>
  T read(const std::string& field) {
    need(sizeof(T), field);
    T v;
    std::memcpy(&v, bytes_.data() + pos_, sizeof(T));
    pos_ += sizeof(T);
    return v;
  }

  std::string read_string(const std::string& field) {
    const auto n = read<std::uint64_t>(field + " (string length)");
    need(n, field + " (string of " + std::to_string(n) + " bytes)");
    std::string s(reinterpret_cast<const char*>(bytes_.data() + pos_), static_cast<std::size_t>(n));
    pos_ += n;
    return s;
  }

 private:
  std::span<const std::byte> bytes_;
  std::string path_;
  std::uint64_t pos_ = 0;
};

std::int64_t read_integer(Cursor& c, ValueType t, const std::string& field) {
  switch (t) {
    case ValueType::u8: return c.read<std::uint8_t>(field);
    case ValueType::i8: return c.read<std::int8_t>(field);
    case ValueType::u16: return c.read<std::uint16_t>(field);
    case ValueType::i16: return c.read<std::int16_t>(field);
    case ValueType::u32: return c.read<std::uint32_t>(field);
    case ValueType::i32: return c.read<std::int32_t>(field);
    case ValueType::i64: return c.read<std::int64_t>(field);
    case ValueType::u64: {
      const auto v = c.read<std::uint64_t>(field);
      if (v > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()))
        c.fail("u64 value " + std::to_string(v) + " is too large", field);
      return static_cast<std::int64_t>(v);
    }
    case ValueType::boolean: {
      const auto v = c.read<std::uint8_t>(field);
      if (v > 1) c.fail("bool value " + std::to_string(v) + " is neither 0 nor 1", field);
      return v;
    }
    default: break;
  }
  c.fail("not an integer type", field);
}

bool integer_type(ValueType t) {
  switch (t) {
    case ValueType::u8:
    case ValueType::i8:
    case ValueType::u16:
    case ValueType::i16:
    case ValueType::u32:
    case ValueType::i32:
    case ValueType::u64:
    case ValueType::i64:
    case ValueType::boolean: return true;
    default: return false;
  }
}

Value read_value(Cursor& c, std::uint32_t raw_type, const std::string& field) {
  if (!known_value_type(raw_type)) c.fail("unknown value type " + std::to_string(raw_type), field);
  Value v;
  v.type = static_cast<ValueType>(raw_type);
  if (integer_type(v.type)) {
    v.integer = read_integer(c, v.type, field);
  } else if (v.type == ValueType::f32) {
    v.real = c.read<float>(field);
  } else if (v.type == ValueType::f64) {
    v.real = c.read<double>(field);
  } else if (v.type == ValueType::string) {
    v.text = c.read_string(field);
  } else {  // array
    const auto et = c.read<std::uint32_t>(field + " (array element type)");
    if (!known_value_type(et)) c.fail("unknown array element type " + std::to_string(et), field);
    v.element_type = static_cast<ValueType>(et);
    if (v.element_type == ValueType::array) c.fail("arrays of arrays are not supported", field);
    const auto n = c.read<std::uint64_t>(field + " (array length)");
    // Bound the allocation by the bytes left: every element takes at least this much.
    const std::size_t min_size = scalar_size(v.element_type);
    if (n > c.remaining() / min_size)
      c.fail("array of " + std::to_string(n) + " elements of type " + to_string(v.element_type) +
                 " exceeds the " + std::to_string(c.remaining()) + " bytes left in the file",
             field);
    const auto count = static_cast<std::size_t>(n);
    if (integer_type(v.element_type)) {
      v.integers.reserve(count);
      for (std::size_t i = 0; i < count; ++i) v.integers.push_back(read_integer(c, v.element_type, field));
    } else if (v.element_type == ValueType::f32) {
      v.reals.reserve(count);
      for (std::size_t i = 0; i < count; ++i) v.reals.push_back(c.read<float>(field));
    } else if (v.element_type == ValueType::f64) {
      v.reals.reserve(count);
      for (std::size_t i = 0; i < count; ++i) v.reals.push_back(c.read<double>(field));
    } else {
      v.strings.reserve(count);
      for (std::size_t i = 0; i < count; ++i) v.strings.push_back(c.read_string(field));
    }
  }
  return v;
}

std::string shape_text(const std::vector<std::uint64_t>& shape) {
  std::string s = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

}  // namespace

const char* to_string(ValueType t) noexcept {
  switch (t) {
    case ValueType::u8: return "u8";
    case ValueType::i8: return "i8";
    case ValueType::u16: return "u16";
    case ValueType::i16: return "i16";
    case ValueType::u32: return "u32";
    case ValueType::i32: return "i32";
    case ValueType::f32: return "f32";
    case ValueType::boolean: return "bool";
    case ValueType::string: return "string";
    case ValueType::array: return "array";
    case ValueType::u64: return "u64";
    case ValueType::i64: return "i64";
    case ValueType::f64: return "f64";
  }
  return "?";
}

bool Value::is_integer() const noexcept { return integer_type(type); }
bool Value::is_real() const noexcept { return type == ValueType::f32 || type == ValueType::f64; }
std::size_t Value::array_size() const noexcept {
  if (type != ValueType::array) return 0;
  return integers.size() + reals.size() + strings.size();
}

std::uint64_t TensorInfo::elements() const noexcept { return element_count(shape); }

File::File(const std::filesystem::path& path) : path_(path), map_(path) {
  const std::string p = path.string();
  file_size_ = map_.size();
  Cursor c(map_.bytes(), p);

  // ---- header
  c.need(4, "header (magic)");
  if (std::memcmp(map_.data(), "GGUF", 4) != 0) {
    std::string got;
    for (int i = 0; i < 4; ++i) {
      const auto ch = static_cast<unsigned char>(map_.data()[i]);
      got += (ch >= 32 && ch < 127) ? std::string(1, static_cast<char>(ch)) : "\\x" + std::to_string(ch);
    }
    c.fail("not a GGUF file: wrong magic '" + got + "' (expected 'GGUF')", "header (magic)");
  }
  c.read<std::uint32_t>("header (magic)");
  version_ = c.read<std::uint32_t>("header (version)");
  if (version_ != 2 && version_ != 3) {
    if ((version_ & 0xffffu) == 0 && version_ != 0)
      c.fail("big-endian GGUF files are not supported", "header (version)");
    c.fail("unsupported GGUF version " + std::to_string(version_) + " (supported: 2, 3)",
           "header (version)");
  }
  const auto n_tensors = c.read<std::uint64_t>("header (tensor count)");
  const auto n_kv = c.read<std::uint64_t>("header (metadata count)");
  // A metadata pair takes at least 8 + 4 + 1 bytes, a tensor info 8 + 4 + 4 + 8.
  if (n_kv > c.remaining() / 13)
    c.fail("truncated or corrupt: metadata count " + std::to_string(n_kv) + " exceeds what the " +
               std::to_string(c.remaining()) + " bytes left can hold",
           "header (metadata count)");
  if (n_tensors > c.remaining() / 24)
    c.fail("truncated or corrupt: tensor count " + std::to_string(n_tensors) + " exceeds what the " +
               std::to_string(c.remaining()) + " bytes left can hold",
           "header (tensor count)");

  // ---- metadata
  keys_.reserve(static_cast<std::size_t>(n_kv));
  for (std::uint64_t i = 0; i < n_kv; ++i) {
    const std::string idx = "metadata pair " + std::to_string(i);
    std::string key = c.read_string(idx + " (key)");
    const std::string field = "key '" + key + "'";
    const auto type = c.read<std::uint32_t>(field + " (type)");
    Value v = read_value(c, type, field);
    if (values_.count(key)) c.fail("duplicate metadata key", field);
    keys_.push_back(key);
    values_.emplace(std::move(key), std::move(v));
  }
  if (const Value* a = find("general.alignment")) {
    if (!a->is_integer() || a->integer <= 0 || (a->integer & (a->integer - 1)) != 0)
      c.fail("alignment must be a positive power of two", "key 'general.alignment'");
    alignment_ = static_cast<std::uint64_t>(a->integer);
  }

  // ---- tensor directory
  tensors_.reserve(static_cast<std::size_t>(n_tensors));
  for (std::uint64_t i = 0; i < n_tensors; ++i) {
    TensorInfo t;
    t.name = c.read_string("tensor info " + std::to_string(i) + " (name)");
    const std::string field = "tensor '" + t.name + "'";
    const auto n_dims = c.read<std::uint32_t>(field + " (dimension count)");
    if (n_dims > max_dims)
      c.fail(std::to_string(n_dims) + " dimensions (at most " + std::to_string(max_dims) + ")", field);
    std::uint64_t elements = 1;
    for (std::uint32_t d = 0; d < n_dims; ++d) {
      const auto ne = c.read<std::uint64_t>(field + " (dimension)");
      if (ne > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()) ||
          (ne != 0 && elements > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()) / ne))
        c.fail("dimension " + std::to_string(ne) + " overflows the element count", field);
      elements *= ne;
      t.shape.push_back(ne);
    }
    t.type = c.read<std::uint32_t>(field + " (type)");
    const auto rel = c.read<std::uint64_t>(field + " (offset)");
    const auto fmt = block_format(t.type);
    if (!fmt) c.fail("unknown tensor type " + std::to_string(t.type), field);
    if (!t.shape.empty() && t.shape[0] % static_cast<std::uint64_t>(fmt->block_elements) != 0)
      c.fail("first dimension " + std::to_string(t.shape[0]) + " is not a multiple of the " +
                 type_name(t.type) + " block size " + std::to_string(fmt->block_elements),
             field);
    const auto bytes = storage_bytes(t.type, elements);
    if (!bytes) c.fail("size of shape " + shape_text(t.shape) + " overflows", field);
    if (rel % alignment_ != 0)
      c.fail("data offset " + std::to_string(rel) + " is not a multiple of the alignment " +
                 std::to_string(alignment_),
             field);
    t.offset = rel;  // made absolute below, once the data section start is known
    t.size = *bytes;
    if (tensor_index_.count(t.name)) c.fail("duplicate tensor name", field);
    tensor_index_.emplace(t.name, tensors_.size());
    tensors_.push_back(std::move(t));
  }

  // ---- data section
  const std::uint64_t end = c.pos();
  data_offset_ = (end + alignment_ - 1) / alignment_ * alignment_;
  for (auto& t : tensors_) {
    const std::string field = "tensor '" + t.name + "'";
    if (t.offset > file_size_ || data_offset_ > file_size_ - t.offset ||
        t.size > file_size_ - data_offset_ - t.offset)
      c.fail("data [" + std::to_string(data_offset_ + t.offset) + ", +" + std::to_string(t.size) +
                 ") lies beyond the end of the file (" + std::to_string(file_size_) + " bytes)",
             field);
    t.offset += data_offset_;
  }
}

const Value* File::find(std::string_view key) const {
  auto it = values_.find(std::string(key));
  return it == values_.end() ? nullptr : &it->second;
}

const Value& File::at(std::string_view key) const {
  const Value* v = find(key);
  if (!v) throw format_error("missing metadata key", where_key(key));
  return *v;
}

std::string File::where_key(std::string_view key) const {
  return path_.string() + ": key '" + std::string(key) + "'";
}

std::string File::where_tensor(std::string_view name) const {
  return path_.string() + ": tensor '" + std::string(name) + "'";
}

namespace {
[[noreturn]] void wrong_type(const File& f, std::string_view key, const Value& v, const char* want) {
  std::string got = to_string(v.type);
  if (v.is_array()) got += std::string(" of ") + to_string(v.element_type);
  throw format_error(std::string("expected ") + want + ", found " + got, f.where_key(key));
}
}  // namespace

std::int64_t File::get_int(std::string_view key) const {
  const Value& v = at(key);
  if (!v.is_integer()) wrong_type(*this, key, v, "an integer");
  return v.integer;
}

std::int64_t File::get_int(std::string_view key, std::int64_t fallback) const {
  return contains(key) ? get_int(key) : fallback;
}

int File::get_int32(std::string_view key) const {
  const std::int64_t v = get_int(key);
  if (v < std::numeric_limits<int>::min() || v > std::numeric_limits<int>::max())
    throw format_error("value " + std::to_string(v) + " does not fit a 32-bit integer", where_key(key));
  return static_cast<int>(v);
}

int File::get_int32(std::string_view key, int fallback) const {
  return contains(key) ? get_int32(key) : fallback;
}

double File::get_float(std::string_view key) const {
  const Value& v = at(key);
  if (v.is_real()) return v.real;
  if (v.is_integer() && v.type != ValueType::boolean) return static_cast<double>(v.integer);
  wrong_type(*this, key, v, "a number");
}

double File::get_float(std::string_view key, double fallback) const {
  return contains(key) ? get_float(key) : fallback;
}

bool File::get_bool(std::string_view key) const {
  const Value& v = at(key);
  if (!v.is_integer()) wrong_type(*this, key, v, "a bool");
  return v.integer != 0;
}

bool File::get_bool(std::string_view key, bool fallback) const {
  return contains(key) ? get_bool(key) : fallback;
}

const std::string& File::get_string(std::string_view key) const {
  const Value& v = at(key);
  if (!v.is_string()) wrong_type(*this, key, v, "a string");
  return v.text;
}

std::string File::get_string(std::string_view key, const std::string& fallback) const {
  return contains(key) ? get_string(key) : fallback;
}

const std::vector<std::string>& File::get_strings(std::string_view key) const {
  const Value& v = at(key);
  if (!v.is_array() || v.element_type != ValueType::string) wrong_type(*this, key, v, "an array of strings");
  return v.strings;
}

const std::vector<std::int64_t>& File::get_ints(std::string_view key) const {
  const Value& v = at(key);
  if (!v.is_array() || !integer_type(v.element_type)) wrong_type(*this, key, v, "an array of integers");
  return v.integers;
}

const std::vector<double>& File::get_floats(std::string_view key) const {
  const Value& v = at(key);
  if (!v.is_array() || (v.element_type != ValueType::f32 && v.element_type != ValueType::f64))
    wrong_type(*this, key, v, "an array of reals");
  return v.reals;
}

const TensorInfo* File::find_tensor(std::string_view name) const {
  auto it = tensor_index_.find(std::string(name));
  return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

std::span<const std::byte> File::tensor_data(const TensorInfo& t) const {
  return map_.region(t.offset, t.size, "tensor data", where_tensor(t.name));
}

}  // namespace bosch::model::gguf

// ---- tokenizer metadata ------------------------------------------------------------

namespace bosch::model {

TokenizerSpec tokenizer_spec_from_gguf(const gguf::File& f) {
  TokenizerSpec s;
  const std::string& model = f.get_string("tokenizer.ggml.model");
  if (model == "llama") {
    s.kind = TokenizerSpec::Kind::spm;
  } else if (model == "gpt2") {
    s.kind = TokenizerSpec::Kind::byte_bpe;
  } else {
    throw format_error("unsupported tokenizer model '" + model + "' (supported: llama, gpt2)",
                       f.where_key("tokenizer.ggml.model"));
  }
  s.pre = f.get_string("tokenizer.ggml.pre", "default");
  s.tokens = f.get_strings("tokenizer.ggml.tokens");
  if (s.tokens.empty())
    throw format_error("empty vocabulary", f.where_key("tokenizer.ggml.tokens"));
  if (s.tokens.size() > static_cast<std::size_t>(std::numeric_limits<int>::max()))
    throw format_error("vocabulary too large", f.where_key("tokenizer.ggml.tokens"));
  const std::size_t n = s.tokens.size();
  if (f.contains("tokenizer.ggml.scores")) {
    const auto& sc = f.get_floats("tokenizer.ggml.scores");
    if (sc.size() != n)
      throw format_error(std::to_string(sc.size()) + " scores for " + std::to_string(n) + " tokens",
                         f.where_key("tokenizer.ggml.scores"));
    s.scores.assign(sc.begin(), sc.end());
  }
  if (f.contains("tokenizer.ggml.token_type")) {
    const auto& tt = f.get_ints("tokenizer.ggml.token_type");
    if (tt.size() != n)
      throw format_error(std::to_string(tt.size()) + " token types for " + std::to_string(n) + " tokens",
                         f.where_key("tokenizer.ggml.token_type"));
    s.token_types.reserve(n);
    for (auto t : tt) {
      if (t < 0 || t > 6)
        throw format_error("token type " + std::to_string(t) + " outside 0..6",
                           f.where_key("tokenizer.ggml.token_type"));
      s.token_types.push_back(static_cast<int>(t));
    }
  }
  if (f.contains("tokenizer.ggml.merges")) s.merges = f.get_strings("tokenizer.ggml.merges");
  auto id = [&](const char* key) {
    const std::int64_t v = f.get_int(key, -1);
    return (v >= 0 && static_cast<std::uint64_t>(v) < n) ? static_cast<int>(v) : -1;
  };
  s.bos = id("tokenizer.ggml.bos_token_id");
  s.eos = id("tokenizer.ggml.eos_token_id");
  s.unk = id("tokenizer.ggml.unknown_token_id");
  s.pad = id("tokenizer.ggml.padding_token_id");
  if (s.kind == TokenizerSpec::Kind::spm) {
    s.add_bos = true;
    s.add_space_prefix = true;
  } else {
    s.add_bos = s.pre == "llama3" || s.pre == "llama-v3" || s.pre == "llama-bpe" || s.pre == "falcon3";
    s.add_space_prefix = false;
  }
  s.add_bos = f.get_bool("tokenizer.ggml.add_bos_token", s.add_bos);
  s.add_space_prefix = f.get_bool("tokenizer.ggml.add_space_prefix", s.add_space_prefix);
  return s;
}

}  // namespace bosch::model
