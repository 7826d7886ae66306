"""SGLang 0.5.23's attention backends on stand-in state, for scripts that call its own prep
methods: scripts/count_sglang_ops.py (counts and times them) and scripts/crosscheck_sglang.py
(holds metaprep's reference against them).

The importing script sets TRITON_INTERPRET=1 for device "cpu" before torch and triton load
(SGLang's Triton kernels then run in Triton's interpreter), imports this module and calls
`configure(device)` before using SGLang. On "cpu", device tensors are CPU tensors of `Dev`,
a subclass that answers is_cuda=True (SGLang's wrappers dispatch on it and assert it), kept
so through factories and uploads by the `Placement` torch-function mode (`with
placement():`), which also marks in the profiler what a CPU trace cannot show by itself:
reads (a device value to the host), uploads (a host list to the device) and device work.
On "cuda" tensors are real and the mode only names call sites while tracing.

The backends are built with `object.__new__` plus the attributes the prep methods read, as
__init__ sets them for an H200 serving DeepSeek-V3.2 (DSA) or DeepSeek-V4 with a DSpark
drafter: bf16 KV, fa3 DSA decode, the default sgl-kernel top-k with its v2 plan, no
CP/DP attention, no kpool, no request window or SWA ring. CUDA extensions these paths call
that are not installed get stand-ins (`stub_extensions`, `stub_jit_topk`), and packages SGLang
imports but these paths never call get placeholder modules where not installed
(IMPORTED_NOT_CALLED: on the GPU image only SGLang's own files, msgspec and dill travel); all
named in STUBBED.
"""
import contextlib
import importlib.abc
import importlib.machinery
import importlib.util
import sys
import types

import torch
from torch.overrides import TorchFunctionMode

ON_CPU = True
DEVICE = torch.device("cpu")
PLACEMENT = None
STUBBED = []
# Annotation prefixes recorded around what a CPU trace cannot show by itself.
LAUNCH, READ, UPLOAD, ON_DEVICE, AT = ("metaprep.launch:", "metaprep.read:",
                                       "metaprep.upload:", "metaprep.device", "metaprep.at")
# True while a profiled call runs: annotations and call sites are recorded only then, so
# untimed overhead stays out of timed calls.
TRACING = False


READ_METHODS = {"tolist", "item", "__int__", "__float__", "__bool__", "__index__", "cpu",
                "numpy"}
FACTORIES = {"empty", "zeros", "ones", "full", "arange", "tensor", "as_tensor",
             "empty_strided", "linspace", "eye", "randint"}


class Dev(torch.Tensor):
    """A CPU tensor standing for a CUDA one: SGLang's wrappers dispatch on is_cuda (Triton
    path) and assert it; TRITON_INTERPRET=1 runs those kernels on the host."""

    @property
    def is_cuda(self):
        return True


def _tensors(x):
    if isinstance(x, torch.Tensor):
        yield x
    elif isinstance(x, (list, tuple)):
        for y in x:
            yield from _tensors(y)
    elif isinstance(x, dict):
        for y in x.values():
            yield from _tensors(y)


def _to_dev(x):
    if isinstance(x, torch.Tensor) and not isinstance(x, Dev):
        return x.as_subclass(Dev)
    if isinstance(x, tuple):
        return tuple(_to_dev(y) for y in x)
    return x


def _plain(x):
    if isinstance(x, Dev):
        return x.as_subclass(torch.Tensor)
    return x


def _is_device_arg(d):
    """A `device=` the prep means as the GPU: SGLang names host tensors "cpu" or no device."""
    return d is not None and d != "cpu"


def call_site():
    """The innermost SGLang source line on the stack, as `sglang/...py:LINE`."""
    f = sys._getframe(2)
    while f is not None:
        name = f.f_code.co_filename
        k = name.rfind("/sglang/")
        if k >= 0:
            return f"{name[k + 1:]}:{f.f_lineno}"
        f = f.f_back
    return "?"


def site_suffix():
    return "@" + call_site() if TRACING else ""


class Placement(TorchFunctionMode):
    """While tracing, names each torch call's SGLang source line (a `metaprep.at@SITE`
    range). With `emulate` (CPU), also keeps device tensors Dev through factories and
    uploads, and records what a CPU trace cannot show: reads (Dev to host), uploads (host
    to Dev) and device work (metaprep.device ranges instead of metaprep.at)."""

    def __init__(self, emulate):
        super().__init__()
        self.emulate = emulate
        self.in_launch = 0

    def __torch_function__(self, func, types_, args=(), kwargs=None):
        kwargs = kwargs or {}
        if self.in_launch:
            return func(*args, **kwargs)
        at = site_suffix()
        if not self.emulate:
            if not at:
                return func(*args, **kwargs)
            with torch.profiler.record_function(AT + at):
                return func(*args, **kwargs)
        name = getattr(func, "__name__", "")
        owner = args[0] if args else None
        if isinstance(owner, Dev) and name in READ_METHODS:
            with torch.profiler.record_function(READ + name + at):
                return _plain(func(*args, **kwargs))
        if name == "to" and isinstance(owner, torch.Tensor):
            target = kwargs.get("device", next((a for a in args[1:]
                                                if isinstance(a, (str, torch.device))), None))
            if isinstance(owner, Dev) and target == "cpu":
                with torch.profiler.record_function(READ + "to" + at):
                    return _plain(func(*args, **kwargs))
            if not isinstance(owner, Dev) and _is_device_arg(target):
                pinned = getattr(owner, "_metaprep_pinned", False)
                kind = "async" if pinned and kwargs.get("non_blocking") else "sync"
                with torch.profiler.record_function(UPLOAD + kind + at):
                    return _to_dev(func(*args, **kwargs))
        if name in FACTORIES and getattr(func, "__module__", "") == "torch":
            pinned = kwargs.pop("pin_memory", False)  # no pinned memory without CUDA
            if _is_device_arg(kwargs.get("device")):
                if name in ("tensor", "as_tensor"):  # a host list copied up, pageable
                    with torch.profiler.record_function(UPLOAD + "sync" + at):
                        return _to_dev(func(*args, **kwargs))
                with torch.profiler.record_function(ON_DEVICE + at):
                    return _to_dev(func(*args, **kwargs))
            with torch.profiler.record_function(AT + at):
                out = func(*args, **kwargs)
            if pinned:
                out._metaprep_pinned = True
            return out
        on_device = any(isinstance(t, Dev) for t in _tensors((args, kwargs)))
        with torch.profiler.record_function((ON_DEVICE if on_device else AT) + at):
            return func(*args, **kwargs)


def dev(values, dtype=torch.int32):
    t = torch.as_tensor(values, dtype=dtype)
    return t.as_subclass(Dev) if ON_CPU else t.to(DEVICE)


def patch_triton_launches():
    """Each Triton launch in a metaprep.launch range (one op, one kernel); on CPU the
    interpreter's own tensor work inside it is not the prep's."""
    if ON_CPU:
        from triton.runtime.interpreter import InterpretedFunction as Kernel
    else:
        from triton.runtime.jit import JITFunction as Kernel
    run = Kernel.run

    def launch(self, *args, **kwargs):
        if PLACEMENT is None or not (TRACING or PLACEMENT.emulate):
            return run(self, *args, **kwargs)
        name = getattr(getattr(self, "fn", None), "__name__", "kernel")
        with torch.profiler.record_function(LAUNCH + "triton:" + name + site_suffix()):
            PLACEMENT.in_launch += 1
            try:
                return run(self, *args, **kwargs)
            finally:
                PLACEMENT.in_launch -= 1

    Kernel.run = launch


def stub_extensions():
    """Stand-ins for the CUDA extensions on the counted paths, where they are not installed:
    DeepGEMM's get_paged_mqa_logits_metadata (the DSA schedule: one torch.empty and one
    kernel in DeepGEMM's C++) and FlashMLA's get_mla_metadata() (an empty Python object)."""
    if importlib.util.find_spec("deep_gemm") is None:
        deep_gemm = types.ModuleType("deep_gemm")
        if not ON_CPU:  # on CUDA SGLang imports more of DeepGEMM at load: placeholders
            deep_gemm.__path__ = []
            deep_gemm.__getattr__ = _Missing.placeholder_attr("deep_gemm")
            sys.meta_path.append(_Missing({"deep_gemm"}))

        def schedule(context_lens, block_kv, num_sms):
            out = torch.empty((num_sms + 1, 2), dtype=torch.int32, device=DEVICE)
            return _to_dev(out) if ON_CPU else out

        deep_gemm.get_paged_mqa_logits_metadata = ext_launch(
            "deep_gemm.get_paged_mqa_logits_metadata", schedule)
        deep_gemm.get_num_sms = lambda: 132  # H200
        sys.modules["deep_gemm"] = deep_gemm
        STUBBED.append("deep_gemm.get_paged_mqa_logits_metadata (its torch.empty, then one "
                       "kernel not launched)")
    if importlib.util.find_spec("flash_mla") is None:
        flash_mla = types.ModuleType("flash_mla")
        flash_mla.__path__ = []
        interface = types.ModuleType("flash_mla.flash_mla_interface")

        class FlashMLASchedMeta:
            """FlashMLA's schedule holder: filled by the first decode call, not here."""

        interface.FlashMLASchedMeta = FlashMLASchedMeta
        flash_mla.flash_mla_interface = interface
        flash_mla.fused_norm_rope_attn_rope_cast = None  # imported, not called here
        flash_mla.get_mla_metadata = lambda *a, **k: (FlashMLASchedMeta(), None)
        sys.modules["flash_mla"] = flash_mla
        sys.modules["flash_mla.flash_mla_interface"] = interface
        STUBBED.append("flash_mla (get_mla_metadata(): an empty schedule object)")



def ext_launch(name, body=None):
    """A stand-in for one extension kernel call: a metaprep.launch range (one launching op
    in the profile view) around `body`, the tensor work the extension does on the host."""

    def call(*args, **kwargs):
        if not TRACING:
            return body(*args, **kwargs) if body else None
        with torch.profiler.record_function(LAUNCH + "ext:" + name + site_suffix()):
            return body(*args, **kwargs) if body else None

    return call


def stub_jit_topk(build):
    """SGLang's JIT top-k v2 module (tvm-ffi, compiled with nvcc on first use): built only
    when `build` (on CUDA); otherwise, or where it does not build, `topk_plan` (one kernel,
    no framework op) is a stand-in."""
    import sglang.kernels.ops.attention.dsv4.topk as topk
    if build and not ON_CPU:
        try:
            topk._jit_topk_v2_module()
            return
        except Exception as e:  # noqa: BLE001 - any build failure means the stand-in
            STUBBED.append(f"sglang JIT topk_v2 did not build here ({type(e).__name__}: "
                           f"{str(e).splitlines()[0][:120]})")
    module = types.SimpleNamespace(topk_plan=ext_launch("sglang.jit.topk_v2.topk_plan"))
    topk._jit_topk_v2_module = lambda: module
    STUBBED.append("sglang JIT topk_v2.topk_plan (one kernel; plan_topk_v2's new_empty is real)")


class _Placeholder:
    """Whatever SGLang takes from a module that is not installed: any attribute, called or
    not, is another placeholder, and a class derived from one a plain class; calls are
    listed in PLACEHOLDER_CALLS (after `configure`, a call is a counted path's: an error)."""

    def __init__(self, name):
        self._name = name

    def __getattr__(self, attr):
        if attr.startswith("__"):
            raise AttributeError(attr)
        return _Placeholder(f"{self._name}.{attr}")

    def __call__(self, *args, **kwargs):
        PLACEHOLDER_CALLS.append(self._name)
        return _Placeholder(f"{self._name}()")

    def __or__(self, other):  # `X | None` in an annotation evaluated at import
        return self

    __ror__ = __or__

    def __getitem__(self, item):  # `X[...]` likewise
        return self

    def __mro_entries__(self, bases):
        return (_PlaceholderBase,)  # a class SGLang derives from it at import: a plain class


class _PlaceholderMeta(type):
    def __getattr__(cls, attr):
        if attr.startswith("__"):
            raise AttributeError(attr)
        return _Placeholder(f"{cls.__name__}.{attr}")


class _PlaceholderBase(metaclass=_PlaceholderMeta):
    """The base of classes SGLang derives from a placeholder: class keywords ignored, any
    missing class attribute a placeholder."""

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__()


PLACEHOLDER_CALLS = []


class _Missing(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Modules under `roots` as placeholders (see IMPORTED_NOT_CALLED)."""

    def __init__(self, roots):
        self.roots = roots

    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in self.roots:
            return importlib.machinery.ModuleSpec(name, self, is_package=True)
        return None

    @staticmethod
    def placeholder_attr(module_name):
        def attr(name):
            if name.startswith("__"):
                raise AttributeError(name)
            return _Placeholder(f"{module_name}.{name}")
        return attr

    def create_module(self, spec):
        module = types.ModuleType(spec.name)
        module.__path__ = []
        module.__getattr__ = self.placeholder_attr(spec.name)
        return module

    def exec_module(self, module):
        pass


# Packages SGLang imports on the way to the metadata code (its server, protocol and tooling
# modules) that the counted methods never call: where not installed (the GPU image), their
# names are placeholders, so only SGLang's own files and msgspec need to travel there.
# sgl_kernel is imported at load on CUDA only (on CPU SGLang catches its ImportError).
IMPORTED_NOT_CALLED = (
    "IPython", "traitlets", "compressed_tensors", "gguf", "loguru", "orjson",
    "partial_json_parser", "pybase64", "starlette", "truststore", "tvm_ffi", "zmq",
    "zstandard", "openai", "jiter", "httpx2", "httpcore2", "sniffio", "pydantic",
    "pydantic_core", "annotated_types", "typing_inspection")


def stub_missing_imports():
    names = IMPORTED_NOT_CALLED + (() if ON_CPU else ("sgl_kernel",))
    roots = {r for r in names if importlib.util.find_spec(r) is None}
    if roots:
        sys.meta_path.append(_Missing(roots))
        STUBBED.append("placeholders (imported at load, not installed here): "
                       + ", ".join(sorted(roots)))


def configure(device, build_jit=False):
    """Device tensors on "cpu" (Dev, Triton interpreted) or "cuda"; patches SGLang for the
    counted paths: Triton launches marked, extensions stood in where missing (SGLang's own
    JIT kernels too unless `build_jit`), no context parallelism published."""
    global ON_CPU, DEVICE, PLACEMENT
    ON_CPU = device == "cpu"
    DEVICE = torch.device(device)
    PLACEMENT = Placement(emulate=ON_CPU)
    stub_missing_imports()
    stub_extensions()
    stub_jit_topk(build_jit)
    patch_triton_launches()
    from sglang.srt.runtime_context import get_parallel
    get_parallel().override_permanently(attn_cp_size=1)
    # Load what the scripts call now: placeholders called at import (a pydantic Field in a
    # class body) are not the preps'; PLACEHOLDER_CALLS from here on are.
    for name in ("sglang.kernels.ops.attention.dsa.metadata",
                 "sglang.kernels.ops.speculative.dspark.dspark_attn_metadata",
                 "sglang.srt.layers.attention.deepseek_v4_backend",
                 "sglang.srt.layers.attention.dsa_backend",
                 "sglang.srt.model_executor.forward_batch_info"):
        importlib.import_module(name)
    PLACEHOLDER_CALLS.clear()


def placement():
    """The Placement mode (use as `with placement():` around SGLang calls): on CPU always
    (device emulation), on CUDA only while tracing (call sites), else nothing."""
    if PLACEMENT.emulate or TRACING:
        return PLACEMENT
    return contextlib.nullcontext()


@contextlib.contextmanager
def tracing():
    """Annotations and call sites on, for one profiled call."""
    global TRACING
    TRACING = True
    try:
        yield
    finally:
        TRACING = False


class Batch:
    """One batch's inputs on the device (`seq_lens_cpu` the host mirror of `seq_lens`)."""

    def __init__(self, *, seq_lens, req_pool_indices, req_to_token, out_cache_loc, block,
                 full_to_swa=None, swa_valid_from=None):
        self.bs, self.block = len(seq_lens), block
        self.seq_lens_cpu = torch.as_tensor(seq_lens, dtype=torch.int32)
        self.seq_lens = dev(self.seq_lens_cpu)
        self.req_pool_indices = dev(req_pool_indices)
        self.req_to_token = dev(req_to_token)
        self.width = self.req_to_token.shape[1]
        self.out_cache_loc = dev(out_cache_loc, dtype=torch.int64)
        self.full_to_swa = None if full_to_swa is None else dev(full_to_swa)
        self.valid_from = None if swa_valid_from is None else dev(swa_valid_from)


def dsa_backend(block, req_to_token, max_bs):
    """DeepseekSparseAttnBackend as __init__ leaves it for DeepSeek-V3.2 on an H200, bf16 KV
    (dsa_backend.py:510-786): only what the counted methods read."""
    from sglang.srt.layers.attention.dsa.dsa_topk_backend import DSATopKBackend
    from sglang.srt.layers.attention.dsa_backend import DeepseekSparseAttnBackend
    b = object.__new__(DeepseekSparseAttnBackend)
    b.device = DEVICE
    b.speculative_num_draft_tokens = block
    b.req_to_token = req_to_token
    b.req_to_token_pool = types.SimpleNamespace(req_to_token=req_to_token)
    b.token_to_kv_pool = types.SimpleNamespace(dtype=torch.bfloat16)
    b._kv_shard_pool = None
    b.hisparse_coordinator = None
    b.dsa_kv_cache_store_fp8 = False
    b.dsa_index_topk = 2048
    b.dsa_index_kpool = 1
    b.physical_page_size = 64
    b._init_kpool_metadata_fusion()  # the fused metadata kernels graph replay calls
    b.use_mha = False
    b.supports_mha_one_shot = True
    b.dsa_prefill_impl = "flashmla_sparse"  # overrides.py:717 (bf16 KV, not Blackwell)
    b.dsa_decode_impl = "fa3"  # overrides.py:726 (major 9)
    b.enable_auto_select_prefill_impl = False
    b.dsa_topk_backend = DSATopKBackend.SGL_KERNEL  # exec_.py:393, with SGLANG_OPT_USE_TOPK_V2
    b.use_fused_topk = False
    b._is_in_breakable_cuda_graph = lambda: False
    b._is_in_tc_piecewise_cuda_graph = lambda: False
    b._get_device_sm = lambda: 90
    b._is_blackwell = lambda: False
    b._multi_ctas_kv_counter_buffer = None
    from sglang.srt.utils.torch_memory_saver_adapter import TorchMemorySaverAdapter
    b._memory_saver_adapter = TorchMemorySaverAdapter.create(enable=False)
    b._arange_buf = dev(torch.arange(16384, dtype=torch.int32))
    b.topk = 0
    b.speculative_num_steps = 0
    b.speculative_step_id = 0
    b.init_cuda_graph_state(max_bs, max_bs * block)
    return b


def dsv4_backend(block, req_to_token, full_to_swa, valid_from):
    """DeepseekV4AttnBackend as the DSpark draft runner's (deepseek_v4_backend.py:1231-1379):
    page size 256, a DSpark draft pool (SWA only: no compress ratios present), no request
    window or SWA ring."""
    from sglang.srt.layers.attention.deepseek_v4_backend import DeepseekV4AttnBackend
    b = object.__new__(DeepseekV4AttnBackend)
    b.device = DEVICE
    b.cuda_int32_kwargs = {"device": DEVICE, "dtype": torch.int32}
    b.page_size = 256
    b.req_to_token = req_to_token
    b.req_to_token_pool = types.SimpleNamespace(req_to_token=req_to_token)
    b.MAX_SEQ_LEN_FOR_CAPTURE = req_to_token.shape[1]
    b.token_to_kv_pool = types.SimpleNamespace(
        request_window=None, swa_req_ring_size=None, swa_valid_from=valid_from,
        full_to_swa_index_mapping=full_to_swa)
    b.present_ratios = ()
    b.low_ratios = ()
    b.has_c4 = False
    b.has_c128 = False
    b.index_topk = 512
    b.is_dspark_draft = True
    b.speculative_num_draft_tokens = block + 1  # gamma = num_draft_tokens - 1
    b.trtllm_attn = False
    b.encoder_replay = False
    b.encoder_row_floor = None
    b.draft_metadata_glued = False
    b._draft_extend_lens = {}
    return b



def forward_batch(case, mode, mirror):
    """The ForwardBatch fields init_forward_metadata reads for `case` (a Batch) in `mode` (a
    ForwardMode name): spec-v2's gpu-only batches, no host mirror unless `mirror`
    (eagle_worker_common.py:216-222 for draft extend)."""
    from sglang.srt.model_executor.forward_batch_info import ForwardMode
    n, bs = case.block, case.bs
    fb = types.SimpleNamespace(
        batch_size=bs, seq_lens=case.seq_lens, req_pool_indices=case.req_pool_indices,
        seq_lens_cpu=case.seq_lens_cpu.to(torch.int64) if mirror else None,
        seq_lens_sum=int(case.seq_lens_cpu.sum()) if mirror else None,
        forward_mode=getattr(ForwardMode, mode), spec_info=None, out_cache_loc=case.out_cache_loc,
        global_num_tokens_cpu=None, attn_cp_metadata=None, extend_seq_lens_cpu=None,
        extend_seq_lens=None, extend_prefix_lens=None, extend_prefix_lens_cpu=None,
        extend_num_tokens=None)
    if mode == "DRAFT_EXTEND_V2":
        fb.extend_seq_lens_cpu = [n] * bs
        fb.extend_seq_lens = dev([n] * bs)
        fb.extend_prefix_lens = dev((case.seq_lens_cpu - n).clamp(min=0))
        fb.extend_prefix_lens_cpu = ((case.seq_lens_cpu - n).clamp(min=0).tolist()
                                     if mirror else None)
        fb.extend_num_tokens = n * bs
    return fb
