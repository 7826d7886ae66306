//! The CUDA sources in `kernels/`, embedded in the binary so a bundle needs no source tree,
//! compiled at run time by NVRTC for the device's own architecture (sm_90 on H100/H200,
//! sm_100 on B200, sm_103 on GB300).

use anyhow::{anyhow, Result};
use cudarc::nvrtc::{compile_ptx_with_opts, CompileError, CompileOptions, Ptx};

// The geometry compiled into the kernels (`#define`d by `source`); the prep shapes and
// the CPU reference use the same values.
/// Tokens per KV page for the DSpark page table.
pub const PAGE_SIZE: i32 = 256;
/// Sliding-window width for DSpark's SWA indices.
pub const SWA_WINDOW: i32 = 128;
/// SWA rows are padded to a multiple of this many columns.
pub const SWA_ALIGN: i32 = 64;
/// DSA sparse attention reads at most this many KV entries per row.
pub const DSA_TOPK: i32 = 2048;
/// Page-table columns in one span; a block loops over spans of its row.
pub const PAGE_COLS_PER_BLOCK: u32 = 2048;
/// DSA's physical KV page size: `real_page_table` holds every 64th column of
/// `page_table_1`, divided by 64 (SGLang 0.5.23 `DeepseekSparseAttnBackend.physical_page_size`).
pub const DSA_REAL_PAGE_SIZE: i32 = 64;
/// Columns per block of SGLang's fused DSA metadata kernels (`BLOCK_N` in
/// python/sglang/kernels/ops/attention/dsa/metadata.py, 0.5.23): graph replay writes a
/// page row in whole blocks of this many columns.
pub const DSA_GRAPH_COL_BLOCK: i32 = 128;

const COMMON: &str = include_str!("../../kernels/common.cuh");
const DSA_COMMON: &str = include_str!("../../kernels/dsa_common.cuh");

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum KernelModule {
    DsparkDraftBlock,
    DsaDecode,
    DsaTargetVerify,
    DsaDraftExtendV2,
    Accept,
    Floor,
    Forward,
}

impl KernelModule {
    pub fn file_name(self) -> &'static str {
        match self {
            Self::DsparkDraftBlock => "dspark_draft_block.cu",
            Self::DsaDecode => "dsa_decode.cu",
            Self::DsaTargetVerify => "dsa_target_verify.cu",
            Self::DsaDraftExtendV2 => "dsa_draft_extend_v2.cu",
            Self::Accept => "accept.cu",
            Self::Floor => "floor.cu",
            Self::Forward => "forward.cu",
        }
    }

    fn body(self) -> &'static str {
        match self {
            Self::DsparkDraftBlock => include_str!("../../kernels/dspark_draft_block.cu"),
            Self::DsaDecode => include_str!("../../kernels/dsa_decode.cu"),
            Self::DsaTargetVerify => include_str!("../../kernels/dsa_target_verify.cu"),
            Self::DsaDraftExtendV2 => include_str!("../../kernels/dsa_draft_extend_v2.cu"),
            Self::Accept => include_str!("../../kernels/accept.cu"),
            Self::Floor => include_str!("../../kernels/floor.cu"),
            Self::Forward => include_str!("../../kernels/forward.cu"),
        }
    }

    fn uses_dsa_common(self) -> bool {
        matches!(
            self,
            Self::DsaDecode | Self::DsaTargetVerify | Self::DsaDraftExtendV2
        )
    }

    /// The full translation unit: constants from Rust, the shared headers, the family file.
    pub fn source(self) -> String {
        let mut src = format!(
            "#define METAPREP_PAGE_SIZE {PAGE_SIZE}\n#define METAPREP_SWA_WINDOW {SWA_WINDOW}\n\
             #define METAPREP_DSA_TOPK {DSA_TOPK}\n#define METAPREP_SWA_ALIGN {SWA_ALIGN}\n\
             #define METAPREP_PAGE_COLS_PER_BLOCK {PAGE_COLS_PER_BLOCK}\n\
             #define METAPREP_DSA_REAL_PAGE_SIZE {DSA_REAL_PAGE_SIZE}\n\
             #define METAPREP_DSA_GRAPH_COL_BLOCK {DSA_GRAPH_COL_BLOCK}\n"
        );
        src.push_str(COMMON);
        if self.uses_dsa_common() {
            src.push_str(DSA_COMMON);
        }
        src.push_str(self.body());
        src
    }

    pub fn compile(self, compute_capability: (i32, i32)) -> Result<Ptx> {
        compile_source(self.file_name(), self.source(), compute_capability)
    }
}

/// Compiles one translation unit; a failure carries NVRTC's log.
fn compile_source(file_name: &str, source: String, (major, minor): (i32, i32)) -> Result<Ptx> {
    let opts = CompileOptions {
        options: vec![
            format!("--gpu-architecture=compute_{major}{minor}"),
            "--std=c++17".into(),
        ],
        name: Some(file_name.into()),
        ..Default::default()
    };
    compile_ptx_with_opts(source, opts).map_err(|e| match e {
        CompileError::CompileError { log, .. } => anyhow!(
            "NVRTC could not compile kernels/{file_name} for compute_{major}{minor}:\n{}",
            log.to_string_lossy()
        ),
        other => anyhow!("NVRTC failed on kernels/{file_name}: {other:?}"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const ALL: [KernelModule; 7] = [
        KernelModule::DsparkDraftBlock,
        KernelModule::DsaDecode,
        KernelModule::DsaTargetVerify,
        KernelModule::DsaDraftExtendV2,
        KernelModule::Accept,
        KernelModule::Floor,
        KernelModule::Forward,
    ];

    /// NVRTC needs no GPU: CI installs it from PyPI (nvidia-cuda-nvrtc-cu12 12.9, the first
    /// NVRTC that knows compute_103, GB300) and runs this for H100/H200, B200 and GB300,
    /// so a kernel that does not compile fails CI rather than a GPU run.
    #[test]
    #[ignore = "needs NVRTC (libnvrtc.so on the library path); .ci/run installs it"]
    fn every_kernel_compiles_with_nvrtc_for_hopper_and_blackwell() {
        crate::gpu::probe::require_nvrtc().expect("NVRTC");
        for cc in [(9, 0), (10, 0), (10, 3)] {
            for module in ALL {
                let ptx = module.compile(cc).unwrap_or_else(|e| panic!("{e:#}"));
                assert!(
                    ptx.to_src().contains(".entry"),
                    "{} has no kernel",
                    module.file_name()
                );
            }
        }
    }

    #[test]
    #[ignore = "needs NVRTC (libnvrtc.so on the library path); .ci/run installs it"]
    fn a_compile_error_reports_the_nvrtc_log() {
        crate::gpu::probe::require_nvrtc().expect("NVRTC");
        let err =
            compile_source("broken.cu", "__global__ void broken( { }".into(), (9, 0)).unwrap_err();
        let message = format!("{err:#}");
        assert!(
            message.contains("NVRTC could not compile kernels/broken.cu for compute_90"),
            "{message}"
        );
        assert!(message.contains("error"), "the log is included: {message}");
    }

    #[test]
    fn sources_carry_the_rust_constants() {
        let src = KernelModule::DsaDecode.source();
        assert!(src.contains(&format!("#define METAPREP_DSA_TOPK {DSA_TOPK}")));
        assert!(
            src.contains("struct DsaArgs"),
            "DSA modules include dsa_common.cuh"
        );
        assert!(!KernelModule::DsparkDraftBlock
            .source()
            .contains("struct DsaArgs"));
    }
}
