// Engine::open: backend choice, model load, KV cache sizing, engine core.
#include <algorithm>
#include <filesystem>
#include <random>
#include <string>
#include <thread>

#include "api/engine_impl.hpp"
#include "core/cpu_backend.hpp"
#include "core/try.hpp"
#include "model/model.hpp"
#include "photon/engine.hpp"
#include "scheduler/backend_runner.hpp"
#include "scheduler/kv_budget.hpp"
#ifdef PHOTON_HAVE_CUDA
#include "cuda/cuda_backend.hpp"
#endif

namespace photon {

namespace {

Result<void> check_options(const EngineOptions& o) {
  auto bad = [](const std::string& what) { return fail(Errc::invalid_argument, "engine option " + what); };
  if (o.model_dir.empty()) return bad("model_dir is empty");
  if (o.backend != "cpu" && o.backend != "cuda" && o.backend != "auto")
    return bad("backend = \"" + o.backend + "\": expected \"cpu\", \"cuda\" or \"auto\"");
  if (o.device < 0) return bad("device = " + std::to_string(o.device) + " is negative");
  if (o.threads < 0) return bad("threads = " + std::to_string(o.threads) + " is negative (0 = all cores)");
  if (o.block_size < 1 || o.block_size > 1024) return bad("block_size = " + std::to_string(o.block_size) + " is outside [1, 1024]");
  if (o.max_batch_tokens < 1) return bad("max_batch_tokens = " + std::to_string(o.max_batch_tokens) + " must be >= 1");
  if (o.max_seqs < 1) return bad("max_seqs = " + std::to_string(o.max_seqs) + " must be >= 1");
  if (o.weights != "auto" && o.weights != "int8" && o.weights != "int8-lm-head")
    return bad("weights = \"" + o.weights + "\": expected \"auto\", \"int8\" or \"int8-lm-head\"");
  if (o.step_overlap != "auto" && o.step_overlap != "on" && o.step_overlap != "off")
    return bad("step_overlap = \"" + o.step_overlap + "\": expected \"auto\", \"on\" or \"off\"");
  if (o.weights != "auto" && o.int8_group_size < 1)
    return bad("int8_group_size = " + std::to_string(o.int8_group_size) + " must be >= 1");
  return {};
}

// EngineOptions::threads resolved: 0 => all cores.
int32_t engine_threads(const EngineOptions& o) {
  return o.threads > 0 ? o.threads : int32_t(std::max(1u, std::thread::hardware_concurrency()));
}

Result<std::unique_ptr<Backend>> make_cpu(const EngineOptions& o) {
  CpuBackendOptions cpu;
  cpu.num_threads = engine_threads(o) - 1;  // the stepping thread computes too
  return make_cpu_backend(cpu);
}

Result<std::unique_ptr<Backend>> make_cuda(const EngineOptions& o) {
#ifdef PHOTON_HAVE_CUDA
  CudaBackendOptions cuda;
  cuda.device = o.device;
  return make_cuda_backend(cuda);
#else
  (void)o;
  return fail(Errc::unsupported, "backend \"cuda\": photon was built without CUDA");
#endif
}

// "auto": a GPU when there is one and its backend serves the model's attention (a folder whose
// config does not load is left to Model::load to report); the CPU otherwise.
Result<std::unique_ptr<Backend>> make_backend(const EngineOptions& o) {
  if (o.backend == "cpu") return make_cpu(o);
  if (o.backend == "cuda") return make_cuda(o);
  auto cuda = make_cuda(o);
  if (!cuda) return make_cpu(o);
  const Result<ModelConfig> config = ModelConfig::load(o.model_dir);
  if (config && !(*cuda)->check_head_dim(config->head_dim)) return make_cpu(o);
  return cuda;
}

// The folder's tokenizer, or null when it has no tokenizer file. A tokenizer
// file that fails to load is an error (not silently ignored).
Result<std::unique_ptr<Tokenizer>> load_tokenizer(const std::string& dir) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!fs::exists(fs::path(dir) / "tokenizer.json", ec) && !fs::exists(fs::path(dir) / "tokenizer.model", ec))
    return std::unique_ptr<Tokenizer>();
  PHOTON_ASSIGN_OR_RETURN(Tokenizer tok, Tokenizer::load(dir));
  return std::make_unique<Tokenizer>(std::move(tok));
}

}  // namespace

Result<Engine> Engine::open(const EngineOptions& options) {
  PHOTON_TRY(check_options(options));
  PHOTON_ASSIGN_OR_RETURN(std::unique_ptr<Backend> backend, make_backend(options));
  const std::string backend_name(backend->name());
  ModelLoadOptions load_options;
  load_options.int8_weights = options.weights == "int8" || options.weights == "int8-lm-head";
  load_options.int8_lm_head = options.weights == "int8-lm-head";
  load_options.int8_group_size = options.int8_group_size;
  load_options.lm_head_screen = options.lm_head_screen;
  // int8: the rows are quantized on `threads` threads (this one included) for the load only.
  std::unique_ptr<ThreadPool> load_pool;
  if (load_options.int8_weights) {
    PHOTON_ASSIGN_OR_RETURN(load_pool, ThreadPool::create(engine_threads(options) - 1));
    load_options.pool = load_pool.get();
  }
  PHOTON_ASSIGN_OR_RETURN(std::unique_ptr<Model> model, Model::load(options.model_dir, *backend, load_options));
  load_pool.reset();
  const ModelConfig& mc = model->config();

  KvBudgetInputs in;
  in.bytes_per_block = model->kv_bytes_per_block(options.block_size);
  in.free_memory = backend->free_memory();
  in.device_memory = backend_name != "cpu";
  in.max_model_len = mc.max_position_embeddings;
  PHOTON_ASSIGN_OR_RETURN(const int32_t num_blocks, kv_cache_blocks(options, in));
  PHOTON_TRY(model->init_kv_cache(num_blocks, options.block_size));
  PHOTON_TRY(model->reserve(options.max_batch_tokens, options.max_seqs));

  std::unique_ptr<Tokenizer> tokenizer;
  if (options.load_tokenizer) {
    PHOTON_ASSIGN_OR_RETURN(tokenizer, load_tokenizer(options.model_dir));
  }

  EngineCoreConfig cc;
  cc.num_blocks = num_blocks;
  cc.block_size = options.block_size;
  cc.max_batch_tokens = options.max_batch_tokens;
  cc.max_seqs = options.max_seqs;
  cc.prefix_caching = options.prefix_caching;
  cc.vocab_size = mc.vocab_size;
  cc.max_model_len = mc.max_position_embeddings;
  cc.eos_token_ids = mc.eos_token_ids;
  if (tokenizer) {
    const auto tok_eos = tokenizer->eos_token_ids();
    cc.eos_token_ids.insert(cc.eos_token_ids.end(), tok_eos.begin(), tok_eos.end());
    std::sort(cc.eos_token_ids.begin(), cc.eos_token_ids.end());
    cc.eos_token_ids.erase(std::unique(cc.eos_token_ids.begin(), cc.eos_token_ids.end()), cc.eos_token_ids.end());
  }
  cc.seed_salt = (uint64_t(std::random_device{}()) << 32) ^ std::random_device{}();
  cc.overlap = options.step_overlap == "on"    ? StepOverlap::on
               : options.step_overlap == "off" ? StepOverlap::off
                                               : StepOverlap::automatic;
  auto runner = std::make_unique<BackendModelRunner>(std::move(backend), std::move(model));
  PHOTON_ASSIGN_OR_RETURN(std::unique_ptr<EngineCore> core, EngineCore::create(std::move(cc), std::move(runner), std::move(tokenizer)));
  return EngineImplAccess::make(std::make_unique<Engine::Impl>(std::move(core), backend_name));
}

}  // namespace photon
