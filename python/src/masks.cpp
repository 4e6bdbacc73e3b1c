// SPDX-License-Identifier: Apache-2.0
// bosch.HeadLayout, mask files (JSON, DuoAttention TSV, grid), the layer
// baselines and mask_from_scores.

#include "masks.hpp"

#include "search.hpp"

#include <bosch/io/atomic_file.hpp>
#include <bosch/io/mask_export.hpp>
#include <bosch/io/mask_io.hpp>
#include <bosch/io/search_metadata.hpp>
#include <bosch/model/gguf_export.hpp>
#include <bosch/model/loader.hpp>

#include <filesystem>

using namespace nb::literals;

namespace bosch::python {

namespace {

/// A mask file as Python sees it.
struct PyMaskFile {
  HeadMask mask;
  nlohmann::json metadata = nlohmann::json::object();
};

enum class Form { json, tsv, grid };

Form form_of(const std::string& path, nb::handle format) {
  if (!format.is_none()) {
    const std::string f = nb::cast<std::string>(format);
    if (f == "json") return Form::json;
    if (f == "tsv") return Form::tsv;
    if (f == "grid" || f == "txt") return Form::grid;
    throw invalid_argument("unknown mask format '" + f +
                               "' (expected json, tsv, grid, kvpress, duo, hf, gguf or layers)",
                           "format");
  }
  const std::string ext = std::filesystem::path(path).extension().string();
  return ext == ".json" ? Form::json : ext == ".tsv" ? Form::tsv : Form::grid;
}

/// The export forms of write_mask (io/mask_export.hpp, model/gguf_export.hpp).
enum class Export { none, kvpress, hf, gguf, layers };

Export export_of(nb::handle format) {
  if (format.is_none()) return Export::none;
  const std::string f = nb::cast<std::string>(format);
  if (f == "kvpress" || f == "duo") return Export::kvpress;
  if (f == "hf") return Export::hf;
  if (f == "gguf") return Export::gguf;
  if (f == "layers") return Export::layers;
  return Export::none;
}

PyMaskFile read_mask(nb::handle path_obj, nb::handle layout_obj, nb::handle format, double threshold) {
  const std::string path = path_from(path_obj);
  if (!(threshold > 0.0 && threshold <= 1.0))
    throw invalid_argument("must lie in (0, 1], got " + std::to_string(threshold), "threshold");
  std::optional<HeadLayout> expected;
  if (!layout_obj.is_none()) expected = layout_from(layout_obj);
  PyMaskFile out;
  if (const Export ex = export_of(format); ex != Export::none) {
    if ((ex == Export::hf || ex == Export::layers) && !expected)
      throw invalid_argument("needed for format '" + nb::cast<std::string>(format) +
                                 "': the file does not record the heads",
                             "layout");
    nb::gil_scoped_release release;
    io::ExportWindows w;
    std::string arch;  // a GGUF model's
    switch (ex) {
      case Export::kvpress: {
        auto p = io::read_duo_pattern(path, expected ? expected->num_query_heads : 0, threshold);
        out.mask = std::move(p.mask);
        w = p.windows;
        break;
      }
      case Export::hf:
      case Export::layers: {
        nlohmann::json j;
        try {
          j = nlohmann::json::parse(io::read_file(path, io::max_mask_bytes, "a mask file"));
        } catch (const nlohmann::json::exception& e) {
          throw format_error(std::string("not valid JSON: ") + e.what(), path);
        }
        auto r = ex == Export::hf ? io::mask_from_hf_config(j, *expected, path)
                                  : io::mask_from_layer_windows(j, *expected, path);
        out.mask = std::move(r.first);
        w = r.second;
        break;
      }
      case Export::gguf: {
        const model::gguf::File g(path);
        const auto gw = model::gguf_windows(g);
        if (!gw) throw format_error("declares no sliding window (no <arch>.attention.sliding_window key)", path);
        const model::Config c = model::config_from_gguf(g);
        out.mask = io::mask_from_swa_layers(c.layout(), gw->swa, path);
        w = {gw->window, 0};
        arch = model::to_string(c.arch);
        break;
      }
      case Export::none: break;
    }
    if (expected) io::check_mask_layout(out.mask, *expected, path);
    out.metadata = nlohmann::json{{"window", w.window}, {"sinks", w.sinks}};
    if (!arch.empty()) out.metadata["architecture"] = arch;
    return out;
  }
  const Form form = form_of(path, format);
  nb::gil_scoped_release release;
  if (form == Form::json) {
    io::MaskFile f = io::read_mask_json(path);
    if (expected) io::check_mask_layout(f.mask, *expected, path);
    out.mask = std::move(f.mask);
    out.metadata = std::move(f.metadata);
    return out;
  }
  // TSV and grid files carry no query-head count: it comes from `layout`.
  HeadMask m = form == Form::tsv ? io::read_mask_tsv(path, 0, threshold) : io::read_mask_grid(path);
  if (expected) {
    const HeadLayout& got = m.layout();
    if (got.num_layers != expected->num_layers || got.num_kv_heads != expected->num_kv_heads)
      throw invalid_argument("mask has " + std::to_string(got.num_layers) + " layers x " +
                                 std::to_string(got.num_kv_heads) + " KV heads, expected " +
                                 std::to_string(expected->num_layers) + " x " +
                                 std::to_string(expected->num_kv_heads),
                             path);
    HeadMask fitted(*expected);
    for (std::size_t i = 0; i < m.size(); ++i) fitted.set_flat(i, m[i]);
    m = std::move(fitted);
  }
  out.mask = std::move(m);
  return out;
}

std::optional<int> optional_int(nb::handle v, const char* what) {
  if (v.is_none()) return std::nullopt;
  if (!nb::isinstance<nb::int_>(v) || nb::isinstance<nb::bool_>(v))
    throw nb::type_error((std::string(what) + ": expected an int").c_str());
  return nb::cast<int>(v);
}

void write_mask(nb::handle path_obj, nb::handle mask_obj, nb::handle layout_obj, nb::handle metadata,
                nb::handle format, nb::handle window_obj, nb::handle sinks_obj, nb::handle model_obj,
                nb::handle max_seq_len_obj, nb::handle arch_obj) {
  const std::string path = path_from(path_obj);
  const Export ex = export_of(format);
  const Form form = ex == Export::none ? form_of(path, format) : Form::json;
  std::optional<HeadLayout> layout;
  if (!layout_obj.is_none()) layout = layout_from(layout_obj);
  const std::optional<int> window = optional_int(window_obj, "window"), sinks = optional_int(sinks_obj, "sinks"),
                           max_seq_len = optional_int(max_seq_len_obj, "max_seq_len");
  const std::string model_path = model_obj.is_none() ? std::string() : path_from(model_obj, "model");
  if (!arch_obj.is_none() && !nb::isinstance<nb::str>(arch_obj)) wrong_type("arch", "a str", arch_obj);
  const std::string arch_given = arch_obj.is_none() ? std::string() : nb::cast<std::string>(arch_obj);
  if (!arch_given.empty() && !io::known_architecture(arch_given))
    throw invalid_argument("unknown architecture '" + arch_given + "' (expected llama, qwen2, qwen3 or qwen3moe)",
                           "arch");
  HeadMask mask;
  nlohmann::json meta = nlohmann::json::object();
  if (nb::isinstance<PyResult>(mask_obj)) {
    const auto& r = nb::cast<const PyResult&>(mask_obj);
    mask = r.result.mask;
    // A TransformerEvaluator's result carries what `bosch select` records.
    meta = r.metadata ? *r.metadata : search_metadata(r.options, r.result);
  } else if (nb::isinstance<PyMaskFile>(mask_obj)) {
    const auto& f = nb::cast<const PyMaskFile&>(mask_obj);
    mask = f.mask;
    meta = f.metadata;
  } else {
    mask = mask_from(mask_obj, layout, "mask");
  }
  if (layout && !(mask.layout() == *layout)) io::check_mask_layout(mask, *layout, "mask");
  // An output never replaces an input: the model an export reads, or the
  // files the search of a Result read.
  std::vector<std::pair<std::string, std::string>> inputs;
  if (!model_path.empty()) inputs.emplace_back("model", model_path);
  if (nb::isinstance<PyResult>(mask_obj))
    for (const auto& in : nb::cast<const PyResult&>(mask_obj).inputs) inputs.push_back(in);
  for (const auto& [what, in] : inputs)
    if (io::same_file(path, in))
      throw invalid_argument("names the same file as " + what + " '" + in +
                                 "': an output never replaces an input; give it another path",
                             "path");
  if (!metadata.is_none()) {
    if (!nb::isinstance<nb::dict>(metadata)) throw nb::type_error("metadata: expected a dict");
    meta.update(python_to_json(metadata, "metadata"));
  }
  if (ex == Export::none) {
    nb::gil_scoped_release release;
    switch (form) {
      case Form::json: io::write_mask_json(path, mask, meta); break;
      case Form::tsv: io::write_mask_tsv(path, mask); break;
      case Form::grid: io::write_mask_grid(path, mask); break;
    }
    return;
  }
  // Exports: window and sinks from the arguments, else the metadata.
  auto meta_int = [&](const char* key) -> std::optional<int> {
    if (meta.contains(key) && meta[key].is_number_integer()) return meta[key].get<int>();
    return std::nullopt;
  };
  io::ExportWindows w;
  if (window)
    w.window = *window;
  else if (auto mw = meta_int("window"))
    w.window = *mw;
  else
    throw invalid_argument("needed for this format: the mask's metadata records no window", "window");
  w.sinks = sinks ? *sinks : meta_int("sinks").value_or(0);
  if (ex == Export::gguf && model_path.empty())
    throw invalid_argument("format 'gguf' writes a copy of the model: pass model=PATH", "model");
  nb::gil_scoped_release release;
  std::optional<model::Config> config;
  if (!model_path.empty()) {
    config = model::read_config(model_path);
    if (!(mask.layout() == config->layout()))
      throw invalid_argument("mask layout " + to_string(mask.layout()) + " does not fit the model's layout " +
                                 to_string(config->layout()),
                             model_path);
  }
  // The architecture the export targets (model, else arch, else the
  // metadata's), and whether its engine would apply the windows at all.
  if (config && !arch_given.empty() && arch_given != model::to_string(config->arch))
    throw invalid_argument("architecture " + arch_given + " differs from the model's, " +
                               model::to_string(config->arch) + " (" + model_path + ")",
                           "arch");
  const std::string arch = io::export_architecture(config ? model::to_string(config->arch) : arch_given,
                                                   config ? model_path : "arch", meta, "mask");
  const char* const format_name = ex == Export::kvpress ? "kvpress" : ex == Export::hf ? "hf"
                                  : ex == Export::gguf  ? "gguf"
                                                        : "layers";
  io::check_export_engine(format_name, arch, mask, "mask");
  switch (ex) {
    case Export::kvpress: io::write_duo_pattern(path, mask, meta, w); break;
    case Export::hf: io::write_file_atomic(path, io::hf_config_patch(mask, w, "mask", arch).dump(2) + "\n"); break;
    case Export::layers: {
      const int n = max_seq_len ? *max_seq_len : config ? config->max_position : 0;
      if (n <= 0)
        throw invalid_argument("needed for format 'layers' (or model=PATH with a context length): the full "
                               "layers' window in max_attention_window",
                               "max_seq_len");
      io::write_file_atomic(path, io::layer_windows(mask, w, n, "mask").dump(2) + "\n");
      break;
    }
    case Export::gguf: model::write_gguf_windows(model_path, path, mask, w); break;
    case Export::none: break;
  }
}

baselines::LayerCount count_of(bool whole_layers) {
  return whole_layers ? baselines::LayerCount::whole_layers : baselines::LayerCount::exact;
}

}  // namespace

void bind_masks(nb::module_& m) {
  nb::class_<HeadLayout>(m, "HeadLayout",
                         "Attention-head layout of a decoder: layers, query heads and KV heads per "
                         "layer (the decision unit is one bit per (layer, KV head)).")
      .def(
          "__init__",
          [](HeadLayout* self, int num_layers, int num_query_heads, int num_kv_heads) {
            const HeadLayout l{num_layers, num_query_heads, num_kv_heads};
            check_layout(l, "HeadLayout");
            new (self) HeadLayout(l);
          },
          "num_layers"_a, "num_query_heads"_a, "num_kv_heads"_a)
      .def(
          "__init__", [](HeadLayout* self, const std::string& text) { new (self) HeadLayout(parse_layout(text)); },
          "text"_a, "From the text form 'LxHqxHkv' (e.g. '30x9x3') or 'LxHkv'.")
      .def_ro("num_layers", &HeadLayout::num_layers)
      .def_ro("num_query_heads", &HeadLayout::num_query_heads)
      .def_ro("num_kv_heads", &HeadLayout::num_kv_heads)
      .def_prop_ro("size", &HeadLayout::size, "decision bits, layers x KV heads")
      .def_prop_ro("group_size", &HeadLayout::group_size, "query heads per KV head")
      .def_prop_ro(
          "shape", [](const HeadLayout& l) { return nb::make_tuple(l.num_layers, l.num_kv_heads); },
          nb::sig("def shape(self, /) -> tuple[int, int]"), "(layers, kv_heads): the shape of a mask")
      .def("__str__", [](const HeadLayout& l) { return to_string(l); })
      .def("__repr__",
           [](const HeadLayout& l) {
             return "HeadLayout(" + std::to_string(l.num_layers) + ", " + std::to_string(l.num_query_heads) +
                    ", " + std::to_string(l.num_kv_heads) + ")";
           })
      .def("__eq__", [](const HeadLayout& a, nb::handle b) {
        return nb::isinstance<HeadLayout>(b) && a == nb::cast<const HeadLayout&>(b);
      })
      .def("__hash__",
           [](const HeadLayout& l) {
             return nb::hash(nb::make_tuple(l.num_layers, l.num_query_heads, l.num_kv_heads));
           })
      .def(
          "__iter__",
          [](const HeadLayout& l) {
            return nb::iter(nb::make_tuple(l.num_layers, l.num_query_heads, l.num_kv_heads));
          },
          nb::sig("def __iter__(self) -> collections.abc.Iterator[int]"));

  nb::class_<PyMaskFile>(m, "MaskFile", "A mask file's content: the mask, its layout and its metadata.")
      .def_prop_ro("mask", [](const PyMaskFile& f) { return mask_to_numpy(f.mask); },
                   nb::sig("def mask(self, /) -> numpy.typing.NDArray[numpy.bool_]"),
                   "bool array (layers, kv_heads), True = SWA")
      .def_prop_ro("layout", [](const PyMaskFile& f) { return f.mask.layout(); },
                   "the layout (TSV and grid files: query heads from the layout given to "
                   "read_mask, else equal to the KV heads)")
      .def_prop_ro("metadata", [](const PyMaskFile& f) { return json_to_python(f.metadata); },
                   nb::sig("def metadata(self, /) -> dict[str, typing.Any]"),
                   "the JSON file's metadata ({} for TSV and grid files)")
      .def("__repr__", [](const PyMaskFile& f) {
        return "MaskFile(layout=" + to_string(f.mask.layout()) + ", swa_heads=" + std::to_string(f.mask.count()) +
               "/" + std::to_string(f.mask.size()) + ")";
      });

  m.def("read_mask", &read_mask, "path"_a, "layout"_a.none() = nb::none(), nb::kw_only(),
        "format"_a.none() = nb::none(), "threshold"_a = 0.5,
        nb::sig("def read_mask(path: str | os.PathLike[str], layout: HeadLayout | str | tuple[int, ...] | None "
                "= None, *, format: typing.Literal['json', 'tsv', 'grid', 'kvpress', 'duo', 'hf', 'gguf', "
                "'layers'] | None = None, threshold: float = 0.5) -> MaskFile"),
        "Reads a mask file: JSON (bosch.head_mask, with metadata), DuoAttention TSV (1 = full\n"
        "attention; values >= threshold are full) or the text grid ('S' = SWA, '.' = full), by\n"
        "extension (.json, .tsv, anything else the grid) or `format`. With `layout` the file must\n"
        "match it (TSV and grid files take their query-head count from it). It also reads the\n"
        "exports of write_mask back (format='kvpress' a pattern directory, 'gguf' a model's windows,\n"
        "'hf' and 'layers' with `layout`); their metadata is then {window, sinks}, and a GGUF's\n"
        "also its architecture. Errors: FileError, FormatError (naming the file and field or\n"
        "line), InvalidArgument (layout mismatch).");
  m.def("write_mask", &write_mask, "path"_a, "mask"_a, "layout"_a.none() = nb::none(), nb::kw_only(),
        "metadata"_a.none() = nb::none(), "format"_a.none() = nb::none(), "window"_a.none() = nb::none(),
        "sinks"_a.none() = nb::none(), "model"_a.none() = nb::none(), "max_seq_len"_a.none() = nb::none(),
        "arch"_a.none() = nb::none(),
        nb::sig("def write_mask(path: str | os.PathLike[str], mask: numpy.typing.ArrayLike | Result | MaskFile, "
                "layout: HeadLayout | str | tuple[int, ...] | None = None, *, "
                "metadata: dict[str, typing.Any] | None = None, "
                "format: typing.Literal['json', 'tsv', 'grid', 'kvpress', 'duo', 'hf', 'gguf', 'layers'] | None "
                "= None, window: int | None = None, sinks: int | None = None, "
                "model: str | os.PathLike[str] | None = None, max_seq_len: int | None = None, "
                "arch: typing.Literal['llama', 'qwen2', 'qwen3', 'qwen3moe'] | None = None) -> None"),
        "Writes a mask atomically as JSON, TSV or grid (by extension or `format`), or exports it\n"
        "for a serving engine (docs/deployment.md): format='kvpress' (or 'duo') writes the\n"
        "DuoAttention pattern directory `path` (full_attention_heads.tsv, config.json; kvpress's\n"
        "DuoAttentionPress(head_compression_ratio=SWA heads / KV heads) reproduces the mask);\n"
        "'hf' a Hugging Face config.json patch (layer_types, sliding_window, max_window_layers);\n"
        "'gguf' a copy of the GGUF `model` with <arch>.attention.sliding_window(_pattern);\n"
        "'layers' per-layer windows (TensorRT-LLM's max_attention_window; full layers get\n"
        "`max_seq_len`, default the model's context length). 'hf', 'gguf' and 'layers' take layer\n"
        "masks only. 'hf' and 'gguf' need the architecture (`model`'s, else `arch`, else the\n"
        "metadata's 'architecture') and raise InvalidArgument where the engine would ignore the\n"
        "windows: 'hf' for llama (transformers' Llama has no sliding window) and for a qwen3moe\n"
        "mask that windows only some layers; 'gguf' for all four (llama.cpp's llama, qwen2, qwen3\n"
        "and qwen3moe graphs attend fully). Exports take\n"
        "`window` and `sinks` from the arguments, else the metadata (e.g. a MaskFile's).\n"
        "`mask` is a bool array (layers, kv_heads) (its query heads from `layout`, default the\n"
        "KV heads), a bosch.Result (its metadata() is written, updated with `metadata`; a result\n"
        "of bosch.select with a bosch.TransformerEvaluator carries the metadata `bosch select`\n"
        "writes: model, tasks, windows, warm starts, cost) or a\n"
        "MaskFile. Only JSON keeps metadata. With `model`, the mask must have its layout.");
  m.def(
      "to_grid", [](nb::handle mask) { return to_grid(mask_from(mask, std::nullopt)); }, "mask"_a,
      nb::sig("def to_grid(mask: numpy.typing.ArrayLike) -> str"),
      "The text grid of a mask: one line per layer, 'S' = SWA, '.' = full.");
  m.def(
      "target_count", [](nb::handle layout, double ratio) { return target_count(layout_from(layout), ratio); },
      "layout"_a, "ratio"_a,
      nb::sig("def target_count(layout: HeadLayout | str | tuple[int, ...], ratio: float) -> int"),
      "round(ratio * layers * kv_heads), halves up: the SWA heads of a search's result.");
  m.def(
      "turnover",
      [](nb::handle a, nb::handle b) { return turnover(mask_from(a, std::nullopt, "a"), mask_from(b, std::nullopt, "b")); },
      "a"_a, "b"_a, nb::sig("def turnover(a: numpy.typing.ArrayLike, b: numpy.typing.ArrayLike) -> float"),
      "|S(a) minus S(b)| / sqrt(|S(a)| |S(b)|) over the SWA-head sets (0 for nested masks).");
  m.def(
      "jaccard_distance",
      [](nb::handle a, nb::handle b) {
        return jaccard_distance(mask_from(a, std::nullopt, "a"), mask_from(b, std::nullopt, "b"));
      },
      "a"_a, "b"_a, nb::sig("def jaccard_distance(a: numpy.typing.ArrayLike, b: numpy.typing.ArrayLike) -> float"),
      "1 - |S(a) and S(b)| / |S(a) or S(b)| over the SWA-head sets.");

  // ---- baselines -----------------------------------------------------------------------------
  const char* layout_sig = "layout: HeadLayout | str | tuple[int, ...]";
  m.def(
      "layer_rand",
      [](nb::handle layout, double ratio, std::uint64_t seed, bool whole_layers) {
        return mask_to_numpy(baselines::layer_rand(layout_from(layout), ratio, seed, count_of(whole_layers)));
      },
      "layout"_a, "ratio"_a, "seed"_a = 0, nb::kw_only(), "whole_layers"_a = false,
      nb::sig(keep_string(std::string("def layer_rand(") + layout_sig +
                          ", ratio: float, seed: int = 0, *, whole_layers: bool = False) -> "
                          "numpy.typing.NDArray[numpy.bool_]")),
      "RAND: random whole layers become SWA (seeded). By default exactly target_count(layout,\n"
      "ratio) heads (one layer partially); whole_layers=True: round(ratio * layers) whole layers.");
  m.def(
      "layer_bme",
      [](nb::handle layout, double ratio, bool whole_layers) {
        return mask_to_numpy(baselines::layer_bme(layout_from(layout), ratio, count_of(whole_layers)));
      },
      "layout"_a, "ratio"_a, nb::kw_only(), "whole_layers"_a = false,
      nb::sig(keep_string(std::string("def layer_bme(") + layout_sig +
                          ", ratio: float, *, whole_layers: bool = False) -> numpy.typing.NDArray[numpy.bool_]")),
      "BME: full layers kept at the beginning, middle and end (Hymba-style); the rest SWA.");
  m.def(
      "layer_intr",
      [](nb::handle layout, double ratio, bool whole_layers) {
        return mask_to_numpy(baselines::layer_intr(layout_from(layout), ratio, count_of(whole_layers)));
      },
      "layout"_a, "ratio"_a, nb::kw_only(), "whole_layers"_a = false,
      nb::sig(keep_string(std::string("def layer_intr(") + layout_sig +
                          ", ratio: float, *, whole_layers: bool = False) -> numpy.typing.NDArray[numpy.bool_]")),
      "INTR: full layers spread evenly (interleaved); the rest SWA.");
  m.def(
      "mask_from_scores",
      [](nb::handle scores, double ratio, const std::string& quota) {
        nb::object arr = numpy().attr("ascontiguousarray")(scores, "dtype"_a = "float64");
        const auto view = nb::cast<nb::ndarray<const double, nb::c_contig>>(arr);
        if (view.ndim() != 2)
          throw invalid_argument("expected scores of shape (layers, kv_heads), got " +
                                     std::to_string(view.ndim()) + " dimensions",
                                 "mask_from_scores");
        const HeadLayout lay{static_cast<int>(view.shape(0)), static_cast<int>(view.shape(1)),
                             static_cast<int>(view.shape(1))};
        baselines::Quota q;
        if (quota == "global")
          q = baselines::Quota::global;
        else if (quota == "per_layer")
          q = baselines::Quota::per_layer;
        else
          throw invalid_argument("unknown quota '" + quota + "' (expected global or per_layer)", "quota");
        return mask_to_numpy(baselines::mask_from_scores(
            lay, std::span<const double>(view.data(), view.size()), ratio, q));
      },
      "scores"_a, "ratio"_a, nb::kw_only(), "quota"_a = "global",
      nb::sig("def mask_from_scores(scores: numpy.typing.ArrayLike, ratio: float, *, "
              "quota: typing.Literal['global', 'per_layer'] = 'global') -> numpy.typing.NDArray[numpy.bool_]"),
      "A mask with exactly target_count SWA heads from your own per-KV-head scores (layers,\n"
      "kv_heads), higher = more global: the lowest-scored heads become SWA, over the whole model\n"
      "(quota='global') or the same number per layer (quota='per_layer'). Ties go to the lower\n"
      "flat index.");
}

}  // namespace bosch::python
