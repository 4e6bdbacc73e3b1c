// The GGUF reader: metadata of every value type, the tensor directory and its
// alignment, tokenizer metadata (synthetic and the real vocab fixtures), and
// malformed files (every truncation, random corruption) raising format_error
// that names the file and field, never crashing.
#include "test_support.hpp"
#include "writers.hpp"

#include <bosch/error.hpp>
#include <bosch/model/gguf.hpp>

#include <boost/random/mersenne_twister.hpp>
#include <boost/random/uniform_int_distribution.hpp>

using namespace bosch;
using namespace bosch::model;
namespace w = bosch::test::writers;

namespace {

/// Runs f, requires it to throw E, and returns what().
template <class E, class F>
std::string error_text(F&& f) {
  try {
    f();
  } catch (const E& e) {
    return e.what();
  } catch (const std::exception& e) {
    FAIL("threw another exception: " << e.what());
  }
  FAIL("did not throw");
  return {};
}

w::GgufWriter small_writer() {
  w::GgufWriter g;
  g.set_string("general.architecture", "llama");
  g.set_u32("llama.block_count", 2);
  const std::vector<float> a(64, 1.5f), b(32, -2.0f);
  g.add_tensor("a.weight", GgmlType::f32, {32, 2}, a);
  g.add_tensor("b.weight", GgmlType::q8_0, {32}, b);
  return g;
}

}  // namespace

TEST_CASE("gguf metadata of every value type reads back") {
  w::TempDir dir("gguf-meta");
  w::GgufWriter g;
  g.set_u8("k.u8", 200);
  g.set_i8("k.i8", -100);
  g.set_u16("k.u16", 65000);
  g.set_i16("k.i16", -30000);
  g.set_u32("k.u32", 4000000000u);
  g.set_i32("k.i32", -2000000000);
  g.set_u64("k.u64", 1ull << 40);
  g.set_i64("k.i64", -(1ll << 40));
  g.set_f32("k.f32", 0.25f);
  g.set_f64("k.f64", 1e-300);
  g.set_bool("k.bool", true);
  g.set_string("k.str", "héllo");
  g.set_strings("k.strs", {"a", "", "ccc"});
  const std::vector<float> fl = {1.0f, -0.5f};
  g.set_f32s("k.f32s", fl);
  const std::vector<std::int32_t> in = {7, -8, 9};
  g.set_i32s("k.i32s", in);
  const std::vector<std::uint8_t> bytes = {0, 255};
  g.set_u8s("k.u8s", bytes);
  g.write(dir / "m.gguf");
  gguf::File f(dir / "m.gguf");
  CHECK(f.version() == 3);
  CHECK(f.keys().size() == 16);
  CHECK(f.keys().front() == "k.u8");
  CHECK(f.get_int("k.u8") == 200);
  CHECK(f.get_int("k.i8") == -100);
  CHECK(f.get_int("k.u16") == 65000);
  CHECK(f.get_int("k.i16") == -30000);
  CHECK(f.get_int("k.u32") == 4000000000ll);
  CHECK(f.get_int("k.i32") == -2000000000);
  CHECK(f.get_int("k.u64") == (1ll << 40));
  CHECK(f.get_int("k.i64") == -(1ll << 40));
  CHECK(f.get_float("k.f32") == 0.25);
  CHECK(f.get_float("k.f64") == 1e-300);
  CHECK(f.get_float("k.i32") == -2e9);  // integers convert
  CHECK(f.get_bool("k.bool"));
  CHECK(f.get_string("k.str") == "héllo");
  CHECK(f.get_strings("k.strs") == std::vector<std::string>{"a", "", "ccc"});
  CHECK(f.get_floats("k.f32s") == std::vector<double>{1.0, -0.5});
  CHECK(f.get_ints("k.i32s") == std::vector<std::int64_t>{7, -8, 9});
  CHECK(f.get_ints("k.u8s") == std::vector<std::int64_t>{0, 255});
  CHECK(f.find("k.strs")->element_type == gguf::ValueType::string);
  CHECK(f.find("k.strs")->array_size() == 3);
  CHECK(f.find("nope") == nullptr);
  CHECK(f.get_int("nope", 5) == 5);
  CHECK(f.get_string("nope", "x") == "x");
  CHECK(f.tensors().empty());

  const std::string p = (dir / "m.gguf").string();
  auto t1 = error_text<format_error>([&] { (void)f.get_int("missing.key"); });
  CHECK(t1.find(p) != std::string::npos);
  CHECK(t1.find("key 'missing.key'") != std::string::npos);
  CHECK(t1.find("missing metadata key") != std::string::npos);
  auto t2 = error_text<format_error>([&] { (void)f.get_string("k.u32"); });
  CHECK(t2.find("expected a string, found u32") != std::string::npos);
  CHECK(t2.find("key 'k.u32'") != std::string::npos);
  auto t3 = error_text<format_error>([&] { (void)f.get_int32("k.u32"); });
  CHECK(t3.find("does not fit a 32-bit integer") != std::string::npos);
  auto t4 = error_text<format_error>([&] { (void)f.get_strings("k.i32s"); });
  CHECK(t4.find("found array of i32") != std::string::npos);
}

TEST_CASE("gguf tensor directory: shapes, types, offsets and alignment") {
  w::TempDir dir("gguf-dir");
  for (std::uint32_t alignment : {32u, 64u, 8u}) {
    for (std::uint32_t version : {2u, 3u}) {
      CAPTURE(alignment);
      CAPTURE(version);
      w::GgufWriter g = small_writer();
      if (alignment != 32) g.set_u32("general.alignment", alignment);
      g.write(dir / "t.gguf", version);
      gguf::File f(dir / "t.gguf");
      CHECK(f.version() == version);
      CHECK(f.alignment() == alignment);
      CHECK(f.data_offset() % alignment == 0);
      REQUIRE(f.tensors().size() == 2);
      const auto* a = f.find_tensor("a.weight");
      REQUIRE(a != nullptr);
      CHECK(a->shape == std::vector<std::uint64_t>{32, 2});
      CHECK(a->type == 0);
      CHECK(a->size == 256);
      CHECK(a->elements() == 64);
      CHECK(a->offset == f.data_offset());
      const auto* b = f.find_tensor("b.weight");
      REQUIRE(b != nullptr);
      CHECK(b->ggml_type() == GgmlType::q8_0);
      CHECK(b->size == 34);
      CHECK((b->offset - f.data_offset()) % alignment == 0);
      CHECK(b->offset + b->size == f.file_size());
      std::vector<float> out(32);
      dequantize(GgmlType::q8_0, f.tensor_data(*b), out);
      CHECK(out[7] == doctest::Approx(-2.0).epsilon(1e-3));  // d = 2/127 in fp16
      f.release();
      CHECK_FALSE(f.mapped());
      CHECK_THROWS_AS((void)f.tensor_data(*b), bosch::error);
      CHECK(f.find_tensor("a.weight") != nullptr);  // directory survives release
    }
  }
}

TEST_CASE("gguf malformed headers and directories raise format_error naming file and field") {
  w::TempDir dir("gguf-bad");
  const auto path = dir / "bad.gguf";
  const std::string p = path.string();
  auto open = [&](const w::Bytes& b) {
    w::write_file(path, b);
    return error_text<format_error>([&] { gguf::File f(path); });
  };
  const w::Bytes good = small_writer().bytes();

  SUBCASE("wrong magic") {
    w::Bytes b = good;
    b[0] = std::byte{'X'};
    const auto t = open(b);
    CHECK(t.find(p) != std::string::npos);
    CHECK(t.find("wrong magic") != std::string::npos);
    CHECK(t.find("magic") != std::string::npos);
  }
  SUBCASE("unsupported versions") {
    for (std::uint32_t v : {1u, 4u, 0x03000000u}) {
      w::Bytes b = good;
      std::memcpy(b.data() + 4, &v, 4);
      const auto t = open(b);
      CHECK(t.find("version") != std::string::npos);
      CHECK(t.find(p) != std::string::npos);
    }
  }
  SUBCASE("every truncation is an error") {
    int count = 0;
    for (std::size_t n = 0; n < good.size(); ++n) {
      w::Bytes b(good.begin(), good.begin() + static_cast<std::ptrdiff_t>(n));
      const auto t = open(b);
      CHECK(t.find(p) != std::string::npos);
      const bool named = t.find("truncated") != std::string::npos || t.find("beyond the end") != std::string::npos;
      if (!named) MESSAGE("prefix " << n << ": " << t);
      count += named;
    }
    CHECK(count == static_cast<int>(good.size()));
  }
  SUBCASE("tensor beyond the end of the file") {
    w::Bytes b = good;
    b.resize(b.size() - 1);
    const auto t = open(b);
    CHECK(t.find("tensor 'b.weight'") != std::string::npos);
    CHECK(t.find("beyond the end of the file") != std::string::npos);
  }
  SUBCASE("unknown tensor type") {
    w::GgufWriter g;
    g.add_raw_tensor("x.weight", 99, {32}, w::Bytes(64));
    const auto t = open(g.bytes());
    CHECK(t.find("tensor 'x.weight'") != std::string::npos);
    CHECK(t.find("unknown tensor type 99") != std::string::npos);
  }
  SUBCASE("row length not a multiple of the block size") {
    w::GgufWriter g;
    g.add_raw_tensor("x.weight", static_cast<std::uint32_t>(GgmlType::q8_0), {33}, w::Bytes(68));
    const auto t = open(g.bytes());
    CHECK(t.find("tensor 'x.weight'") != std::string::npos);
    CHECK(t.find("block size 32") != std::string::npos);
  }
  SUBCASE("too many dimensions") {
    w::GgufWriter g;
    g.add_raw_tensor("x.weight", 0, {1, 1, 1, 1, 1}, w::Bytes(4));
    CHECK(open(g.bytes()).find("5 dimensions") != std::string::npos);
  }
  SUBCASE("overflowing shape") {
    w::GgufWriter g;
    g.add_raw_tensor("x.weight", 0, {1ull << 40, 1ull << 40}, w::Bytes(4));
    const auto t = open(g.bytes());
    CHECK(t.find("tensor 'x.weight'") != std::string::npos);
    CHECK(t.find("overflow") != std::string::npos);
  }
  SUBCASE("duplicate tensor") {
    w::GgufWriter g = small_writer();
    const std::vector<float> a(64, 0.0f);
    g.add_tensor("a.weight", GgmlType::f32, {32, 2}, a);
    const auto t = open(g.bytes());
    CHECK(t.find("duplicate tensor name") != std::string::npos);
    CHECK(t.find("tensor 'a.weight'") != std::string::npos);
  }
  SUBCASE("duplicate key") {
    w::GgufWriter g = small_writer();
    g.set_u32("llama.block_count", 3);
    const auto t = open(g.bytes());
    CHECK(t.find("duplicate metadata key") != std::string::npos);
    CHECK(t.find("key 'llama.block_count'") != std::string::npos);
  }
  SUBCASE("unknown value type") {
    w::GgufWriter g;
    g.raw_kv("weird", 13, w::Bytes(8));
    const auto t = open(g.bytes());
    CHECK(t.find("key 'weird'") != std::string::npos);
    CHECK(t.find("unknown value type 13") != std::string::npos);
  }
  SUBCASE("bad bool") {
    w::GgufWriter g;
    g.raw_kv("flag", 7, w::Bytes{std::byte{2}});
    CHECK(open(g.bytes()).find("neither 0 nor 1") != std::string::npos);
  }
  SUBCASE("nested array") {
    w::GgufWriter g;
    w::Bytes payload;
    w::put<std::uint32_t>(payload, 9);
    w::put<std::uint64_t>(payload, 0);
    g.raw_kv("nested", 9, payload);
    CHECK(open(g.bytes()).find("arrays of arrays") != std::string::npos);
  }
  SUBCASE("array longer than the file") {
    w::GgufWriter g;
    w::Bytes payload;
    w::put<std::uint32_t>(payload, 8);  // strings
    w::put<std::uint64_t>(payload, 1ull << 60);
    g.raw_kv("tokenizer.ggml.tokens", 9, payload);
    const auto t = open(g.bytes());
    CHECK(t.find("key 'tokenizer.ggml.tokens'") != std::string::npos);
    CHECK(t.find("exceeds") != std::string::npos);
  }
  SUBCASE("string longer than the file") {
    w::GgufWriter g;
    w::Bytes payload;
    w::put<std::uint64_t>(payload, 1ull << 62);
    g.raw_kv("general.name", 8, payload);
    const auto t = open(g.bytes());
    CHECK(t.find("key 'general.name'") != std::string::npos);
    CHECK(t.find("truncated") != std::string::npos);
  }
  SUBCASE("huge counts in the header") {
    w::Bytes b = good;
    const std::uint64_t huge = 1ull << 62;
    std::memcpy(b.data() + 8, &huge, 8);
    CHECK(open(b).find("tensor count") != std::string::npos);
    b = good;
    std::memcpy(b.data() + 16, &huge, 8);
    CHECK(open(b).find("metadata count") != std::string::npos);
  }
  SUBCASE("bad alignment") {
    w::GgufWriter g;
    g.set_u32("general.alignment", 24);
    CHECK(open(g.bytes()).find("key 'general.alignment'") != std::string::npos);
  }
  SUBCASE("misaligned tensor offset") {
    w::Bytes b = good;
    // The offset of the first tensor is the last 8 bytes of its directory entry:
    // find "a.weight" and step over name, n_dims, dims and type.
    const std::string name = "a.weight";
    auto it = std::search(b.begin(), b.end(), reinterpret_cast<const std::byte*>(name.data()),
                          reinterpret_cast<const std::byte*>(name.data()) + name.size());
    REQUIRE(it != b.end());
    const std::size_t off = static_cast<std::size_t>(it - b.begin()) + name.size() + 4 + 16 + 4;
    const std::uint64_t bad = 4;
    std::memcpy(b.data() + off, &bad, 8);
    const auto t = open(b);
    CHECK(t.find("tensor 'a.weight'") != std::string::npos);
    CHECK(t.find("not a multiple of the alignment") != std::string::npos);
  }
}

TEST_CASE("gguf reader survives random corruption") {
  // Random bytes of the header/directory overwritten: opening either succeeds
  // or throws bosch::error, never anything else (run under sanitizers in CI
  // to also catch out-of-bounds reads).
  w::TempDir dir("gguf-fuzz");
  const auto path = dir / "fuzz.gguf";
  const w::Bytes good = small_writer().bytes();
  boost::random::mt19937_64 rng(bosch::test::seed(11));
  boost::random::uniform_int_distribution<std::size_t> pos(0, 200);
  boost::random::uniform_int_distribution<int> byte(0, 255), count(1, 4);
  int errors = 0, ok = 0;
  for (int trial = 0; trial < 400; ++trial) {
    w::Bytes b = good;
    for (int k = count(rng); k > 0; --k) b[std::min(pos(rng), b.size() - 1)] = static_cast<std::byte>(byte(rng));
    w::write_file(path, b);
    try {
      gguf::File f(path);
      for (const auto& t : f.tensors()) (void)f.tensor_data(t);
      ++ok;
    } catch (const bosch::error&) {
      ++errors;
    } catch (const std::exception& e) {
      FAIL("non-bosch exception: " << e.what());
    }
  }
  MESSAGE("corrupted files: " << errors << " rejected, " << ok << " still valid");
  CHECK(errors > 0);
}

TEST_CASE("missing and unreadable files are file_error") {
  const auto t = error_text<file_error>([] { gguf::File f("/nonexistent/dir/model.gguf"); });
  CHECK(t.find("/nonexistent/dir/model.gguf") != std::string::npos);
  CHECK_THROWS_AS(gguf::File(std::filesystem::temp_directory_path()), file_error);
}

TEST_CASE("tokenizer_spec_from_gguf from written metadata") {
  w::TempDir dir("gguf-tok");
  SUBCASE("byte-level BPE") {
    auto m = w::random_model({}, bosch::test::seed(4));
    w::write_gguf(m, dir / "m.gguf");
    gguf::File f(dir / "m.gguf");
    const TokenizerSpec s = tokenizer_spec_from_gguf(f);
    CHECK(s.kind == TokenizerSpec::Kind::byte_bpe);
    CHECK(s.pre == "gpt2");
    CHECK(s.tokens == m.tokenizer.tokens);
    CHECK(s.token_types == m.tokenizer.token_types);
    CHECK(s.merges == m.tokenizer.merges);
    CHECK(s.bos == m.tokenizer.bos);
    CHECK(s.eos == m.tokenizer.eos);
    CHECK(s.unk == -1);
    CHECK_FALSE(s.add_bos);
    CHECK_FALSE(s.add_space_prefix);
  }
  SUBCASE("spm defaults, scores, out-of-range ids ignored") {
    w::GgufWriter g;
    g.set_string("tokenizer.ggml.model", "llama");
    g.set_strings("tokenizer.ggml.tokens", {"<unk>", "<s>", "</s>", "\xe2\x96\x81" "a"});
    const std::vector<float> scores = {0, 0, 0, -1.5f};
    g.set_f32s("tokenizer.ggml.scores", scores);
    g.set_u32("tokenizer.ggml.bos_token_id", 1);
    g.set_u32("tokenizer.ggml.eos_token_id", 2);
    g.set_u32("tokenizer.ggml.unknown_token_id", 0);
    g.set_u32("tokenizer.ggml.padding_token_id", 4294967295u);
    g.write(dir / "spm.gguf");
    gguf::File f(dir / "spm.gguf");
    const TokenizerSpec s = tokenizer_spec_from_gguf(f);
    CHECK(s.kind == TokenizerSpec::Kind::spm);
    CHECK(s.pre == "default");
    CHECK(s.scores == std::vector<float>{0, 0, 0, -1.5f});
    CHECK(s.bos == 1);
    CHECK(s.eos == 2);
    CHECK(s.unk == 0);
    CHECK(s.pad == -1);
    CHECK(s.add_bos);
    CHECK(s.add_space_prefix);
  }
  SUBCASE("errors name the key") {
    w::GgufWriter g;
    g.set_string("tokenizer.ggml.model", "bert");
    g.set_strings("tokenizer.ggml.tokens", {"a"});
    g.write(dir / "x.gguf");
    const auto t = error_text<format_error>([&] { (void)tokenizer_spec_from_gguf(gguf::File(dir / "x.gguf")); });
    CHECK(t.find("unsupported tokenizer model 'bert'") != std::string::npos);
    CHECK(t.find("key 'tokenizer.ggml.model'") != std::string::npos);
    w::GgufWriter h;
    h.set_string("tokenizer.ggml.model", "gpt2");
    h.set_strings("tokenizer.ggml.tokens", {"a", "b"});
    const std::vector<std::int32_t> types = {1};
    h.set_i32s("tokenizer.ggml.token_type", types);
    h.write(dir / "y.gguf");
    const auto u = error_text<format_error>([&] { (void)tokenizer_spec_from_gguf(gguf::File(dir / "y.gguf")); });
    CHECK(u.find("1 token types for 2 tokens") != std::string::npos);
    CHECK(u.find("key 'tokenizer.ggml.token_type'") != std::string::npos);
  }
}

TEST_CASE("tokenizer_spec_from_gguf on the real vocab fixtures") {
  struct Case {
    const char* file;
    std::size_t tokens, merges;
    const char* pre;
    int bos, eos;
    bool add_bos;
  };
  const Case cases[] = {{"vocab/ggml-vocab-gpt-2.gguf", 50257, 50000, "gpt-2", 50256, 50256, false},
                        {"vocab/ggml-vocab-llama-bpe.gguf", 128256, 280147, "llama-bpe", 128000, 128001, true},
                        {"vocab/ggml-vocab-qwen2.gguf", 151936, 151387, "qwen2", 151643, 151643, false}};
  for (const Case& c : cases) {
    const auto path = bosch::test::fixture(c.file);
    if (path.empty()) continue;
    CAPTURE(c.file);
    gguf::File f(path);
    CHECK(f.tensors().empty());
    const TokenizerSpec s = tokenizer_spec_from_gguf(f);
    CHECK(s.kind == TokenizerSpec::Kind::byte_bpe);
    CHECK(s.tokens.size() == c.tokens);
    CHECK(s.token_types.size() == c.tokens);
    CHECK(s.merges.size() == c.merges);
    CHECK(s.pre == c.pre);
    CHECK(s.bos == c.bos);
    CHECK(s.eos == c.eos);
    CHECK(s.add_bos == c.add_bos);
    CHECK(s.tokens[0] == "!");  // byte-level BPE vocabularies start with the printable bytes
  }
}
