// SPDX-License-Identifier: Apache-2.0
// libFuzzer target: safetensors files (bosch::model::safetensors::File) and
// the fp32 conversion of their tensors.

#include "fuzz_support.hpp"

#include <bosch/model/safetensors.hpp>

#include <vector>

using namespace bosch;
using namespace bosch::model;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const auto path = fuzz::write_scratch("model.safetensors", data, size);
  const std::string p = path.string();
  fuzz::check(
      [&] {
        const safetensors::File f(path);
        std::vector<float> buf;
        std::uint64_t end = 0;
        for (const auto& t : f.tensors()) {
          fuzz::require(f.find_tensor(t.name) == &t, "find_tensor does not find a listed tensor");
          fuzz::require(t.offset >= end || t.size == 0, "tensors overlap");
          fuzz::require(t.offset + t.size <= size, "tensor beyond the end of the file");
          if (t.size) end = t.offset + t.size;
          const auto bytes = f.tensor_data(t);
          fuzz::require(bytes.size() == t.size, "tensor_data size differs from the header");
          fuzz::require(t.elements() * safetensors::dtype_size(t.dtype) == t.size,
                        "shape and byte range disagree");
          if (safetensors::can_convert(t.dtype)) {
            buf.resize(static_cast<std::size_t>(t.elements()));
            safetensors::to_fp32(t.dtype, bytes, buf);  // checked by the reader: must not throw
          }
        }
      },
      p);
  return 0;
}
