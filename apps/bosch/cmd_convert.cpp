// SPDX-License-Identifier: Apache-2.0
// bosch convert IN OUT: a mask between JSON, DuoAttention-style TSV and the text
// grid, and exports that serving engines load (kvpress/DuoAttention pattern
// directories, Hugging Face config patches, GGUF copies, per-layer windows;
// io/mask_export.hpp, model/gguf_export.hpp, docs/deployment.md).

#include "commands.hpp"
#include "errors.hpp"
#include "files.hpp"
#include "mask_files.hpp"
#include "output_options.hpp"

#include <bosch/io/mask_export.hpp>
#include <bosch/model/gguf_export.hpp>
#include <bosch/model/loader.hpp>

#include <iostream>
#include <variant>

namespace bosch::cli {

namespace {

/// The forms convert reads and writes: the three mask files, and the exports.
enum class Form { json, tsv, grid, kvpress, hf, gguf, layers };

constexpr const char* form_names = "json, tsv, grid, kvpress (or duo), hf, gguf or layers";

const char* form_name(Form f) {
  switch (f) {
    case Form::json: return "json";
    case Form::tsv: return "tsv";
    case Form::grid: return "grid";
    case Form::kvpress: return "kvpress";
    case Form::hf: return "hf";
    case Form::gguf: return "gguf";
    case Form::layers: return "layers";
  }
  return "?";
}

bool is_mask_file(Form f) { return f == Form::json || f == Form::tsv || f == Form::grid; }

MaskFormat mask_file_format(Form f) {
  return f == Form::json ? MaskFormat::json : f == Form::tsv ? MaskFormat::tsv : MaskFormat::grid;
}

Form parse_form(const std::string& name, const std::string& option) {
  if (name == "kvpress" || name == "duo") return Form::kvpress;
  if (name == "hf") return Form::hf;
  if (name == "gguf") return Form::gguf;
  if (name == "layers") return Form::layers;
  if (name == "json" || name == "tsv" || name == "grid" || name == "txt") {
    const MaskFormat m = parse_mask_format(name, option);
    return m == MaskFormat::json ? Form::json : m == MaskFormat::tsv ? Form::tsv : Form::grid;
  }
  throw invalid_argument("unknown mask format '" + name + "' (expected " + form_names + ")", option);
}

/// --from/--to when given; else a directory holding a pattern (input) is
/// kvpress, ".gguf" is gguf, the rest by mask_format_of.
Form form_of(const std::filesystem::path& path, const std::string& explicit_form, const std::string& option,
             bool input) {
  if (!explicit_form.empty()) return parse_form(explicit_form, option);
  std::error_code ec;
  if (input && std::filesystem::is_directory(path, ec)) return Form::kvpress;
  if (path.extension() == ".gguf") return Form::gguf;
  const MaskFormat m = io::mask_format_of(path);
  return m == MaskFormat::json ? Form::json : m == MaskFormat::tsv ? Form::tsv : Form::grid;
}

/// Re-raises a bosch::invalid_argument (a mask or model a format cannot
/// take, not a bad option value) as a runtime failure (exit 1).
template <class F>
void as_runtime_failure(F&& f) {
  try {
    f();
  } catch (const bosch::invalid_argument& e) {
    throw runtime_failure(e.what());
  }
}

}  // namespace

int run_convert(int argc, char** argv) {
  return run_command("convert", [&]() -> int {
    OutputOptions oo;
    std::string in, out, out_option, from, to, layout_text, model_path, arch_option;
    double threshold = 0.5;
    int window = 0, sinks = -1, max_seq_len = 0;
    CommandLine cl("convert", "bosch convert [options] IN (OUT | -o OUT)",
                   "Convert a head mask between the three forms ('-' = stdin/stdout):\n"
                   "  json  bosch mask file: layout, SWA KV heads per layer, metadata\n"
                   "  tsv   DuoAttention-style: one row per layer, one value per KV head,\n"
                   "        1 = full attention, 0 = SWA (real-valued gates: >= --threshold is full)\n"
                   "  grid  one line per layer, one character per KV head: S = SWA, . = full\n"
                   "or export it for a serving engine (docs/deployment.md):\n"
                   "  kvpress, duo  a DuoAttention pattern directory: full_attention_heads.tsv\n"
                   "        (real scores, every full head above every SWA head) and config.json\n"
                   "        (sink_size, recent_size = the window); pass kvpress's\n"
                   "        DuoAttentionPress(head_compression_ratio=SWA heads / KV heads), the\n"
                   "        value config.json records, to get exactly this mask\n"
                   "  hf    a patch of a Hugging Face config.json: layer_types, sliding_window,\n"
                   "        use_sliding_window, max_window_layers for qwen2/qwen3 (layer masks\n"
                   "        only). transformers applies it for qwen2 and qwen3 (qwen3moe: all\n"
                   "        layers or none); refused for llama, whose attention has no window\n"
                   "  gguf  a copy of the GGUF model --model with <arch>.attention.sliding_window\n"
                   "        and sliding_window_pattern (layer masks only). llama.cpp reads them only\n"
                   "        for SWA architectures (gemma2/3, ...), none of llama, qwen2, qwen3,\n"
                   "        qwen3moe, so for these it is refused\n"
                   "  layers  per-layer windows: TensorRT-LLM max_attention_window and\n"
                   "        sink_token_length (any architecture; layer masks only), plus the\n"
                   "        layer-id lists and layer_types for reference (SGLang reads no user\n"
                   "        layer list; for vLLM use --to hf)\n"
                   "Forms are chosen by extension (.json, .tsv, .gguf, a directory for kvpress,\n"
                   "anything else the grid) or --from/--to. TSV, grid, hf and layers files do not\n"
                   "record the query-head count, so reading them into JSON needs --layout (or\n"
                   "--model). Exports take the window and sinks from the mask's metadata, else\n"
                   "--window/--sinks. hf and gguf need the model's architecture, from --model,\n"
                   "--arch or the mask's metadata (\"architecture\", which bosch select records),\n"
                   "and refuse (exit 2) where the engine would ignore the windows.\n"
                   "JSON metadata is kept JSON to JSON.");
    cl.options.add_options()("from", po::value(&from)->value_name("FORM"), "form of IN")(
        "to", po::value(&to)->value_name("FORM"),
        "form of OUT: json|tsv|grid|kvpress|duo|hf|gguf|layers")(
        "output,o", po::value(&out_option)->value_name("PATH"), "OUT (instead of the second argument)")(
        "layout", po::value(&layout_text)->value_name("LxHqxHkv"),
        "layers x query heads x KV heads (e.g. 30x9x3); checked against IN")(
        "model,m", po::value(&model_path)->value_name("PATH"),
        "the model (GGUF file or HF directory): the file gguf copies; its layout is checked "
        "against the mask's, and its context length is --max-seq-len's default")(
        "arch", po::value(&arch_option)->value_name("NAME"),
        "exports: the model's architecture, llama|qwen2|qwen3|qwen3moe (default: --model's, else the "
        "mask's metadata \"architecture\")")(
        "window", po::value(&window)->value_name("W"), "exports: window in keys (default: the mask's metadata)")(
        "sinks", po::value(&sinks)->value_name("S"), "exports: sink tokens (default: the mask's metadata, else 0)")(
        "max-seq-len", po::value(&max_seq_len)->value_name("N"),
        "layers: the full layers' window, the longest context served (default: --model's context length)")(
        "threshold", po::value(&threshold)->default_value(threshold)->value_name("T"),
        "TSV input: values >= T mean full attention");
    cl.options.add(oo.describe());
    cl.hidden.add_options()("input", po::value(&in))("output-file", po::value(&out));
    cl.positional.add("input", 1).add("output-file", 1);
    cl.epilog = "Examples:\n  bosch convert mask.json full_attention_heads.tsv\n"
                "  bosch convert --layout 30x9x3 heads.tsv mask.json\n"
                "  bosch convert mask.json - --to grid\n"
                "  bosch convert mask.json --to kvpress -o pattern/\n"
                "  bosch convert layer-mask.json --to gguf --model model.gguf -o model-swa.gguf\n"
                "  bosch convert layer-mask.json --to hf -o config-patch.json\n";
    po::variables_map vm;
    if (!cl.parse(argc, argv, vm)) return exit_success;
    if (!out.empty() && !out_option.empty()) throw usage_error("OUT given twice (as an argument and as -o)");
    if (out.empty()) out = out_option;
    if (in.empty() || out.empty()) throw usage_error("expected IN and OUT (the second argument or -o PATH)");
    if (!(threshold > 0.0 && threshold <= 1.0))
      throw bosch::invalid_argument("must lie in (0, 1], got " + std::to_string(threshold), "--threshold");
    if (vm.count("window") && window < 1)
      throw bosch::invalid_argument("must be >= 1, got " + std::to_string(window), "--window");
    if (vm.count("sinks") && sinks < 0)
      throw bosch::invalid_argument("must be >= 0, got " + std::to_string(sinks), "--sinks");
    if (vm.count("max-seq-len") && max_seq_len < 1)
      throw bosch::invalid_argument("must be >= 1, got " + std::to_string(max_seq_len), "--max-seq-len");
    // "out/" names the directory "out".
    if (out.size() > 1 && out.back() == '/') out.pop_back();
    check_not_inputs({{"OUT", out}}, {{"IN", in}, {"--model", model_path}, {"--config", cl.config_file()}});
    const Form src = in == "-" && from.empty() ? Form::json : form_of(in, from, "--from", true);
    const Form dst = out == "-" && to.empty() ? Form::grid : form_of(out, to, "--to", false);
    if (in == "-" && (src == Form::kvpress || src == Form::gguf))
      throw usage_error(std::string("a ") + form_name(src) + " input cannot come from stdin");
    if (out == "-" && (dst == Form::kvpress || dst == Form::gguf))
      throw usage_error(std::string("a ") + form_name(dst) + " export cannot go to stdout (it is " +
                        (dst == Form::kvpress ? "a directory" : "a model file") + ")");
    if (dst == Form::gguf && model_path.empty())
      throw usage_error("--model is needed: --to gguf writes a copy of the model with the windows");
    if (!arch_option.empty() && !io::known_architecture(arch_option))
      throw bosch::invalid_argument(
          "unknown architecture '" + arch_option + "' (expected llama, qwen2, qwen3 or qwen3moe)", "--arch");
    std::optional<HeadLayout> layout;
    if (!layout_text.empty()) layout = for_option("--layout", [&] { return parse_layout(layout_text); });
    // The model's layout and context length: read before anything is written.
    std::optional<model::Config> model_config;
    if (!model_path.empty()) {
      model_config = model::read_config(model_path);
      if (layout && !(*layout == model_config->layout()))
        throw usage_error("--layout " + to_string(*layout) + " differs from the model's layout " +
                          to_string(model_config->layout()) + " (" + model_path + ")");
      if (!layout) layout = model_config->layout();
      if (!arch_option.empty() && arch_option != model::to_string(model_config->arch))
        throw usage_error("--arch " + arch_option + " differs from the model's architecture " +
                          model::to_string(model_config->arch) + " (" + model_path + ")");
    }
    if (src == Form::gguf && !layout) {
      model_config = model::read_config(in);
      layout = model_config->layout();
    }
    const bool needs_layout = src == Form::tsv || src == Form::grid || src == Form::hf || src == Form::layers;
    if (needs_layout && (dst == Form::json || src == Form::hf || src == Form::layers) && !layout)
      throw usage_error("--layout LxHqxHkv (or --model) is needed: a " + std::string(form_name(src)) +
                        " file does not record the " +
                        (src == Form::hf || src == Form::layers ? "heads" : "query-head count"));
    // A pattern is a directory (io::write_duo_pattern checks what it replaces);
    // every other form is one file.
    if (dst == Form::kvpress)
      check_output_dir(out, "OUT");
    else
      check_output_path(out, "OUT");

    // ---- read
    io::MaskFile f;
    std::optional<io::ExportWindows> read_windows;  // what an export read back declares
    auto read_json_doc = [&](const std::string& text, const std::string& where) {
      try {
        return nlohmann::json::parse(text);
      } catch (const nlohmann::json::exception& e) {
        throw format_error(std::string("not valid JSON: ") + e.what(), where);
      }
    };
    as_runtime_failure([&] {
      switch (src) {
        case Form::json:
        case Form::tsv:
        case Form::grid: f = read_mask_file(in, mask_file_format(src), layout, threshold); break;
        case Form::kvpress: {
          auto p = io::read_duo_pattern(in, layout ? layout->num_query_heads : 0, threshold);
          if (layout) io::check_mask_layout(p.mask, *layout, in);
          f.mask = std::move(p.mask);
          read_windows = p.windows;
          break;
        }
        case Form::hf: {
          const std::string text = read_input(in, io::max_mask_bytes, "a mask file");
          auto [m, w] = io::mask_from_hf_config(read_json_doc(text, input_name(in)), *layout, input_name(in));
          f.mask = std::move(m);
          if (w.window > 0) read_windows = w;
          break;
        }
        case Form::layers: {
          const std::string text = read_input(in, io::max_mask_bytes, "a mask file");
          auto [m, w] = io::mask_from_layer_windows(read_json_doc(text, input_name(in)), *layout, input_name(in));
          f.mask = std::move(m);
          read_windows = w;
          break;
        }
        case Form::gguf: {
          const model::gguf::File g(in);
          const auto w = model::gguf_windows(g);
          if (!w) throw format_error("declares no sliding window (no <arch>.attention.sliding_window key)", in);
          f.mask = io::mask_from_swa_layers(*layout, w->swa, in);
          read_windows = io::ExportWindows{w->window, 0};
          f.metadata["architecture"] = model::to_string(model::config_from_gguf(g).arch);
          break;
        }
      }
    });
    if (read_windows) {  // the windows travel into JSON metadata, and to other exports
      f.metadata["window"] = read_windows->window;
      f.metadata["sinks"] = read_windows->sinks;
    }
    if (model_config && src != Form::gguf)
      as_runtime_failure([&] {
        if (!(f.mask.layout() == model_config->layout()))
          throw invalid_argument("mask layout " + to_string(f.mask.layout()) + " does not fit the model's layout " +
                                     to_string(model_config->layout()),
                                 model_path);
      });

    // ---- write
    if (is_mask_file(dst)) {
      write_mask_file(out, mask_file_format(dst), f.mask, src == Form::json || read_windows ? f.metadata
                                                                                              : nlohmann::json::object());
    } else {
      io::ExportWindows w;
      if (vm.count("window"))
        w.window = window;
      else if (auto mw = metadata_int(f.metadata, "window", input_name(in)))
        w.window = *mw;
      else
        throw usage_error("--window W is needed: the mask's metadata records no window");
      w.sinks = vm.count("sinks") ? sinks : metadata_int(f.metadata, "sinks", input_name(in)).value_or(0);
      // The architecture the export targets, and whether its engine would
      // apply the windows at all (a refusal is exit 2, before anything is written).
      const std::string arch =
          io::export_architecture(!model_path.empty() ? model::to_string(model_config->arch) : arch_option,
                                  !model_path.empty() ? model_path : "--arch", f.metadata, input_name(in));
      io::check_export_engine(form_name(dst), arch, f.mask, input_name(in));
      as_runtime_failure([&] {
        switch (dst) {
          case Form::kvpress: io::write_duo_pattern(out, f.mask, f.metadata, w); break;
          case Form::hf:
            write_output(out, io::hf_config_patch(f.mask, w, input_name(in), arch).dump(2) + "\n");
            break;
          case Form::layers: {
            int n = max_seq_len;
            if (n == 0 && model_config) n = model_config->max_position;
            if (n <= 0)
              throw usage_error("--max-seq-len N (or --model with a context length) is needed: full layers' "
                                "window in max_attention_window is the longest context served");
            write_output(out, io::layer_windows(f.mask, w, n, input_name(in)).dump(2) + "\n");
            break;
          }
          case Form::gguf: model::write_gguf_windows(model_path, out, f.mask, w); break;
          default: break;
        }
      });
    }
    oo.detail() << "bosch convert: " << input_name(in) << " (" << form_name(src) << ") -> "
                << (out == "-" ? "<stdout>" : out) << " (" << form_name(dst) << "): " << to_string(f.mask.layout())
                << ", " << f.mask.count() << " of " << f.mask.size() << " KV heads SWA\n";
    return exit_success;
  });
}

}  // namespace bosch::cli
