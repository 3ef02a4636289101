# Everything a fresh machine needs: `make demo` runs the main job, `make test` runs the tests.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
PROTOS := $(sort $(wildcard proto/*.proto))
# protoc writes `import x_pb2` between the generated modules; the sed makes those imports relative,
# since the modules ship inside the package strategy._generated.
PROTOC = $(PY) -m grpc_tools.protoc -Iproto --include_source_info \
	--python_out=$(1) --pyi_out=$(1) --descriptor_set_out=$(1)/distributed_strategy.desc $(PROTOS) && \
	sed -i -E 's/^import ([a-z_]+_pb2) as /from . import \1 as /' $(1)/*_pb2.py $(1)/*_pb2.pyi

.PHONY: install proto proto-check docs lint test test-long test-transformers test-zoo demo bench bench-gpu bench-tune fuzz clean

install: $(STAMP)

# torch goes in first, pinned, so nothing pulls a multi-GB CUDA build.
$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet torch==2.13.0
	$(PY) -m pip install --quiet -e '.[test,dev,examples,hf,metrics]'
	touch $(STAMP)

proto: $(STAMP)
	$(call PROTOC,generated)

proto-check: $(STAMP)
	@tmp=$$(mktemp -d) && trap 'rm -rf "$$tmp"' EXIT && $(call PROTOC,$$tmp) && \
	for f in $$tmp/*; do cmp -s "$$f" "generated/$$(basename $$f)" || { \
		echo "generated/$$(basename $$f) is stale: run 'make proto' and commit it"; exit 1; }; done && \
	for f in generated/*_pb2.py generated/*_pb2.pyi; do [ -e "$$tmp/$$(basename $$f)" ] || { \
		echo "$$f has no .proto any more: delete it"; exit 1; }; done && \
	echo "generated/ is up to date ($(words $(PROTOS)) .proto files)"

# The reference page is generated from the schema; tests/strategy/schema/test_reference.py checks it is fresh.
docs: $(STAMP)
	$(VENV)/bin/strategy docs > docs/strategy-reference.md.tmp && mv docs/strategy-reference.md.tmp docs/strategy-reference.md

# The Hugging Face tests on both ends of the supported transformers range (pyproject's hf extra): the oldest release
# is installed beside the venv with what pip resolves for it (huggingface-hub < 2, its tokenizers, ...), as a user of
# that release has, and put first on the path; torch and this project come from the venv, which has the newest. `make test` runs, on the oldest,
# one test of each call whose spelling moved across the range (plans, sequence parallelism, recompute, the pipeline's
# own-forward stages, sep's and cp's AttentionInterface, the MoE experts, checkpoints, the fine-tuning example); test-transformers runs them all.
TRANSFORMERS_OLDEST := $(shell sed -n 's/^OLDEST, NEWEST = "\([^"]*\)".*/\1/p' src/parallel/compose/transformers_versions.py)
OLDEST_DIR := $(VENV)/transformers-$(TRANSFORMERS_OLDEST)
HF_TESTS := tests/parallel/compose/test_transformers_versions.py tests/parallel/compose/test_parallelize.py tests/parallel/sep/test_sep.py tests/parallel/cp/test_cp.py \
	tests/parallel/experts/test_experts.py tests/parallel/pipeline/test_pipeline.py tests/parallel/checkpoint/test_checkpoint.py tests/parallel/sharding/test_sharding.py tests/parallel/tensor/test_tied.py
HF_RANGE_TESTS := tests/parallel/compose/test_transformers_versions.py \
	tests/parallel/compose/test_parallelize.py::test_sequence_parallel_hugging_face_models_match_too \
	tests/parallel/compose/test_parallelize.py::test_qwen3s_per_head_norms_sum_their_gradients_over_mp \
	tests/parallel/compose/test_parallelize.py::test_recomputing_with_a_padding_mask_gives_the_gradients_of_keeping_the_activations \
	tests/parallel/compose/test_parallelize.py::test_finetune_script_loads_a_local_checkpoint_and_trains_under_torchrun \
	tests/parallel/pipeline/test_pipeline.py::test_llama_at_pp2_trains_as_one_process_on_every_schedule \
	tests/parallel/sep/test_sep.py::test_a_gqa_llama_with_uneven_prompt_labels_trains_as_one_process \
	tests/parallel/cp/test_cp.py::test_a_gqa_llama_with_uneven_prompt_labels_trains_as_one_process \
	"tests/parallel/experts/test_experts.py::test_a_small_moe_with_uneven_routing_trains_as_one_process[qwen3_moe_ep2]" \
	"tests/parallel/experts/test_experts.py::test_a_small_moe_with_uneven_routing_trains_as_one_process[mixtral_ep2]" \
	"tests/parallel/experts/test_experts.py::test_a_small_moe_with_uneven_routing_trains_as_one_process[qwen3_moe_ep2_mp2_dp2]" \
	tests/parallel/checkpoint/test_checkpoint.py::test_full_state_dict_of_a_parallelised_llama_loads_into_a_plain_one_with_the_same_logits \
	"tests/zoo/test_zoo.py::test_each_architecture_trains_as_one_process_at_every_axis_or_is_refused_by_name[gemma2]" \
	"tests/zoo/test_zoo.py::test_each_architecture_trains_as_one_process_at_every_axis_or_is_refused_by_name[mistral]"

# Static checks: pyflakes-level lint everywhere, types on the two packages.
lint: $(STAMP)
	$(VENV)/bin/ruff check src tests bench examples fuzz
	cd src && ../$(VENV)/bin/mypy strategy parallel

test: $(STAMP) proto-check lint $(OLDEST_DIR)/.installed
	$(PY) -m pytest -q
	@echo "== the Hugging Face tests of each moved call, on transformers $(TRANSFORMERS_OLDEST) (the oldest supported)"
	PYTHONPATH=$(OLDEST_DIR) $(PY) -m pytest -q $(HF_RANGE_TESTS)

$(OLDEST_DIR)/.installed: $(STAMP)
	rm -rf $(OLDEST_DIR)
	$(PY) -m pip install --quiet --target $(OLDEST_DIR) transformers==$(TRANSFORMERS_OLDEST)
	touch $@

test-transformers: $(OLDEST_DIR)/.installed
	PYTHONPATH=$(OLDEST_DIR) $(PY) -m pytest -q $(HF_TESTS)
	$(PY) -m pytest -q $(HF_TESTS)

# Every causal LM of the installed transformers at every axis, beside one process (make test runs a slice of it in
# tests/zoo/test_zoo.py); writes the table of docs/model-zoo.md and fails on a run that diverges, crashes or hangs.
# Everything `make test` runs, plus the tests marked long and every property test at its full number of examples.
test-long: $(STAMP) $(OLDEST_DIR)/.installed
	STRATEGY_TESTS_LONG=1 $(PY) -m pytest -q

test-zoo: $(STAMP)
	$(PY) tests/zoo/run_zoo.py --write docs/model-zoo.md

# The main job: 2 CPU ranks (gloo) train a small GPT with all three column-parallel flags on.
demo: $(STAMP)
	rm -rf out/demo  # a fresh run: with its checkpoints there, a second run would resume at the last step
	$(VENV)/bin/strategy validate examples/strategies/*.prototxt
	$(VENV)/bin/torchrun --standalone --nproc-per-node 2 examples/train_gpt.py \
		--strategy examples/strategies/mp2_all_flags.prototxt --steps 400 --out out/demo --trace --check-replicas 100
	@echo "outputs: out/demo/{strategy.prototxt,loss.png,metrics.png,metrics_rank0.jsonl,summary.json,trace_rank0.json,checkpoints/step-400}"

# Benchmarks (not part of make test): each prints a table and writes bench/results/NAME.json.
# Paddle's column in config_load needs `pip install paddlepaddle==3.3.1` in .venv.
BENCHES := tp_block overlap fused skip scaling sequence_parallel parallelize_hf checkpoint state_mesh training_options sharding \
	pipeline sep cp expert plan dp metrics
# transformers' own tensor parallelism (a column of parallelize_hf) needs accelerate.
bench: $(STAMP)
	$(PY) -m pip install --quiet accelerate
	@for b in $(BENCHES); do echo "== bench/$$b.py"; $(PY) bench/$$b.py || exit 1; echo; done
	$(PY) bench/config_load.py

# strategy tune against the ground truth: every layout that fits measured 3 times, 5 tunes, the baselines (about an
# hour and a half on 2 CPUs; bench/results/tune.json).
bench-tune: $(STAMP)
	$(PY) bench/tune.py

# The same on a CUDA machine: NCCL, CUDA events, bf16 weights with fp32 main_grad.
bench-gpu: $(STAMP)
	@for b in $(BENCHES); do echo "== bench/$$b.py --device cuda"; CUDA_DEVICE_MAX_CONNECTIONS=1 $(PY) bench/$$b.py --device cuda || exit 1; echo; done

# Coverage-guided fuzzing of the loaders (atheris): FUZZ_RUNS inputs, 100,000 by default.
fuzz: $(STAMP)
	$(PY) -m pip install --quiet 'atheris>=2.3'
	$(PY) fuzz/fuzz_loaders.py

clean:
	rm -rf $(VENV) build *.egg-info src/*.egg-info
