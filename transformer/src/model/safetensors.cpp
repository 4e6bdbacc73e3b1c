// SPDX-License-Identifier: Apache-2.0
// safetensors reader (see bosch/model/safetensors.hpp).

#include <bosch/error.hpp>
#include <bosch/model/dequant.hpp>
#include <bosch/model/safetensors.hpp>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstring>
#include <limits>

namespace bosch::model::safetensors {

namespace {
constexpr std::uint64_t max_header = 100u * 1000u * 1000u;  // the format's own limit

std::string shape_text(const std::vector<std::uint64_t>& shape) {
  std::string s = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}
}  // namespace

std::size_t dtype_size(std::string_view d) noexcept {
  if (d == "F64" || d == "I64" || d == "U64") return 8;
  if (d == "F32" || d == "I32" || d == "U32") return 4;
  if (d == "F16" || d == "BF16" || d == "I16" || d == "U16") return 2;
  if (d == "I8" || d == "U8" || d == "BOOL" || d == "F8_E4M3" || d == "F8_E5M2") return 1;
  return 0;
}

bool can_convert(std::string_view d) noexcept { return d == "F32" || d == "F16" || d == "BF16"; }

void to_fp32(std::string_view dtype, std::span<const std::byte> src, std::span<float> dst) {
  GgmlType t;
  if (dtype == "F32") t = GgmlType::f32;
  else if (dtype == "F16") t = GgmlType::f16;
  else if (dtype == "BF16") t = GgmlType::bf16;
  else throw invalid_argument("cannot convert dtype " + std::string(dtype) + " to fp32");
  dequantize(t, src, dst);
}

std::uint64_t TensorInfo::elements() const noexcept { return element_count(shape); }

File::File(const std::filesystem::path& path) : path_(path), map_(path) {
  const std::string p = path.string();
  const std::uint64_t size = map_.size();
  auto fail = [&](const std::string& msg, const std::string& field) -> void {
    throw format_error(msg, field.empty() ? p : p + ": " + field);
  };
  if (size < 8) fail("truncated: " + std::to_string(size) + " bytes, no header length", "header");
  std::uint64_t n = 0;
  std::memcpy(&n, map_.data(), 8);
  if (n > max_header) fail("header length " + std::to_string(n) + " exceeds 100 MB", "header");
  if (n > size - 8)
    fail("truncated: header of " + std::to_string(n) + " bytes, file has " + std::to_string(size),
         "header");
  const std::uint64_t base = 8 + n;
  const std::uint64_t buffer = size - base;
  nlohmann::json h;
  std::string duplicate;  // a top-level key seen twice (JSON allows it; the format does not)
  std::unordered_map<std::string, int> seen;
  auto on_event = [&](int depth, nlohmann::json::parse_event_t ev, nlohmann::json& parsed) {
    if (depth == 1 && ev == nlohmann::json::parse_event_t::key && parsed.is_string() &&
        ++seen[parsed.get<std::string>()] == 2 && duplicate.empty())
      duplicate = parsed.get<std::string>();
    return true;
  };
  try {
    h = nlohmann::json::parse(reinterpret_cast<const char*>(map_.data()) + 8,
                              reinterpret_cast<const char*>(map_.data()) + base, on_event);
  } catch (const nlohmann::json::exception& e) {
    fail(std::string("header is not valid JSON: ") + e.what(), "header");
  }
  if (!h.is_object()) fail("header is not a JSON object", "header");
  if (!duplicate.empty()) fail("duplicate tensor name", "tensor '" + duplicate + "'");
  for (auto it = h.begin(); it != h.end(); ++it) {
    const std::string& name = it.key();
    if (name == "__metadata__") {
      if (!it->is_object()) fail("__metadata__ is not an object", "__metadata__");
      for (auto m = it->begin(); m != it->end(); ++m) {
        if (!m->is_string()) fail("value is not a string", "__metadata__ '" + m.key() + "'");
        metadata_[m.key()] = m->get<std::string>();
      }
      continue;
    }
    const std::string field = "tensor '" + name + "'";
    const auto& e = *it;
    if (!e.is_object()) fail("entry is not an object", field);
    if (!e.contains("dtype") || !e["dtype"].is_string()) fail("missing or non-string dtype", field);
    if (!e.contains("shape") || !e["shape"].is_array()) fail("missing or non-array shape", field);
    if (!e.contains("data_offsets") || !e["data_offsets"].is_array() || e["data_offsets"].size() != 2)
      fail("data_offsets must be an array [begin, end]", field);
    TensorInfo t;
    t.name = name;
    t.dtype = e["dtype"].get<std::string>();
    const std::size_t es = dtype_size(t.dtype);
    if (es == 0) fail("unknown dtype '" + t.dtype + "'", field);
    std::uint64_t elements = 1;
    for (const auto& d : e["shape"]) {
      if (!d.is_number_unsigned()) fail("shape entries must be non-negative integers", field);
      const auto v = d.get<std::uint64_t>();
      if (v != 0 && elements > std::numeric_limits<std::uint64_t>::max() / es / v)
        fail("shape overflows", field);
      elements *= v;
      t.shape.push_back(v);
    }
    const auto& off = e["data_offsets"];
    if (!off[0].is_number_unsigned() || !off[1].is_number_unsigned())
      fail("data_offsets must be non-negative integers", field);
    const auto b = off[0].get<std::uint64_t>(), en = off[1].get<std::uint64_t>();
    if (b > en) fail("data_offsets begin " + std::to_string(b) + " > end " + std::to_string(en), field);
    if (en > buffer)
      fail("data [" + std::to_string(b) + ", " + std::to_string(en) +
               ") lies beyond the end of the file (buffer of " + std::to_string(buffer) + " bytes)",
           field);
    if (en - b != elements * es)
      fail("data_offsets span " + std::to_string(en - b) + " bytes, but " + t.dtype + " shape " +
               shape_text(t.shape) + " needs " + std::to_string(elements * es),
           field);
    t.offset = base + b;
    t.size = en - b;
    tensors_.push_back(std::move(t));
  }
  std::sort(tensors_.begin(), tensors_.end(),
            [](const TensorInfo& a, const TensorInfo& b) { return a.offset < b.offset; });
  // Compare with the furthest end so far, not only the previous tensor: an
  // empty tensor between two overlapping ones hid the overlap.
  std::uint64_t end = 0;
  std::size_t end_of = 0;
  for (std::size_t i = 0; i < tensors_.size(); ++i) {
    const TensorInfo& t = tensors_[i];
    if (t.size > 0 && t.offset < end)
      fail("data overlaps tensor '" + tensors_[end_of].name + "'", "tensor '" + t.name + "'");
    if (t.offset + t.size > end) end = t.offset + t.size, end_of = i;
    index_.emplace(t.name, i);
  }
}

const TensorInfo* File::find_tensor(std::string_view name) const {
  auto it = index_.find(std::string(name));
  return it == index_.end() ? nullptr : &tensors_[it->second];
}

std::span<const std::byte> File::tensor_data(const TensorInfo& t) const {
  return map_.region(t.offset, t.size, "tensor data", where_tensor(t.name));
}

std::string File::where_tensor(std::string_view name) const {
  return path_.string() + ": tensor '" + std::string(name) + "'";
}

}  // namespace bosch::model::safetensors
