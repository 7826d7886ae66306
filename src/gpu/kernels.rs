//! The CUDA sources in `kernels/`, embedded in the binary so a bundle needs no source tree,
//! compiled at run time by NVRTC to the run's [`KernelImage`]: a cubin for the device's own
//! architecture (sm_90 on H100/H200, sm_100 on B200, sm_103 on GB300), or PTX.

use super::image::KernelImage;
use super::nvrtc::{self, Output};
use anyhow::Result;
use cudarc::nvrtc::Ptx;

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
/// Page-table columns in one span: one pass of a 256-thread block, four columns (one 16-byte
/// load and store) a thread; a block loops over spans of its row.
pub const PAGE_COLS_PER_BLOCK: u32 = 1024;
/// DSA's physical KV page size: `real_page_table` holds every 64th column of
/// `page_table_1`, divided by 64 (SGLang 0.5.23 `DeepseekSparseAttnBackend.physical_page_size`).
pub const DSA_REAL_PAGE_SIZE: i32 = 64;
/// Columns per block of SGLang's fused DSA metadata kernels (`BLOCK_N` in
/// python/sglang/kernels/ops/attention/dsa/metadata.py, 0.5.23): graph replay writes a
/// page row in whole blocks of this many columns.
pub const DSA_GRAPH_COL_BLOCK: i32 = 128;
/// `col_limit` values the DSA page-table stage reads as a page rule rather than a column
/// count: eager-device's (the max the lengths stage left on the device) and graph replay's
/// (each row in whole [`DSA_GRAPH_COL_BLOCK`]-column blocks).
pub const DSA_COLS_FROM_DEVICE: i32 = -1;
pub const DSA_COLS_BY_BLOCK: i32 = -2;

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
    /// The mapped read's store kernel (eager-mapped).
    HostRead,
}

impl KernelModule {
    /// Every module, in the order `doctor` compiles them.
    pub const ALL: [KernelModule; 8] = [
        KernelModule::DsparkDraftBlock,
        KernelModule::DsaDecode,
        KernelModule::DsaTargetVerify,
        KernelModule::DsaDraftExtendV2,
        KernelModule::Accept,
        KernelModule::Floor,
        KernelModule::Forward,
        KernelModule::HostRead,
    ];

    pub fn file_name(self) -> &'static str {
        match self {
            Self::DsparkDraftBlock => "dspark_draft_block.cu",
            Self::DsaDecode => "dsa_decode.cu",
            Self::DsaTargetVerify => "dsa_target_verify.cu",
            Self::DsaDraftExtendV2 => "dsa_draft_extend_v2.cu",
            Self::Accept => "accept.cu",
            Self::Floor => "floor.cu",
            Self::Forward => "forward.cu",
            Self::HostRead => "host_read.cu",
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
            Self::HostRead => include_str!("../../kernels/host_read.cu"),
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
             #define METAPREP_DSA_GRAPH_COL_BLOCK {DSA_GRAPH_COL_BLOCK}\n\
             #define METAPREP_DSA_COLS_FROM_DEVICE ({DSA_COLS_FROM_DEVICE})\n\
             #define METAPREP_DSA_COLS_BY_BLOCK ({DSA_COLS_BY_BLOCK})\n"
        );
        src.push_str(COMMON);
        if self.uses_dsa_common() {
            src.push_str(DSA_COMMON);
        }
        src.push_str(self.body());
        src
    }

    /// The module as `image` says: a cubin, or PTX for the driver to JIT. (cudarc's `Ptx`
    /// carries either to `load_module`.)
    pub fn compile(self, image: &KernelImage) -> Result<Ptx> {
        Ok(
            match nvrtc::compile(self.file_name(), &self.source(), image.arch, image.cubin)? {
                Output::Cubin(bytes) => Ptx::from_binary(bytes),
                Output::Ptx(text) => Ptx::from_src(text),
            },
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// NVRTC needs no GPU: CI installs it from PyPI (nvidia-cuda-nvrtc-cu12 12.9, the first
    /// NVRTC that knows sm_103, GB300) and runs this for H100/H200, B200 and GB300, as
    /// cubins and as PTX, so a kernel that does not compile fails CI rather than a GPU run.
    #[test]
    #[ignore = "needs NVRTC (on the linker path or in a Python venv); .ci/run installs one"]
    fn every_kernel_compiles_with_nvrtc_for_hopper_and_blackwell_as_cubin_and_ptx() {
        crate::gpu::probe::require_nvrtc().expect("NVRTC");
        for arch in [90, 100, 103] {
            for module in KernelModule::ALL {
                let name = module.file_name();
                let compile = |cubin| {
                    nvrtc::compile(name, &module.source(), arch, cubin)
                        .unwrap_or_else(|e| panic!("{e:#}"))
                };
                match compile(true) {
                    Output::Cubin(elf) => assert!(
                        elf.starts_with(b"\x7fELF") && elf.len() > 1024,
                        "{name} sm_{arch}: not a cubin ({} bytes)",
                        elf.len()
                    ),
                    Output::Ptx(_) => panic!("{name} sm_{arch}: PTX where a cubin was asked for"),
                }
                match compile(false) {
                    Output::Ptx(text) => {
                        assert!(text.contains(".entry"), "{name}: no kernel in its PTX");
                        assert!(
                            text.contains(&format!(".target sm_{arch}")),
                            "{name}: PTX for another target"
                        );
                    }
                    Output::Cubin(_) => {
                        panic!("{name} compute_{arch}: a cubin where PTX was asked for")
                    }
                }
            }
        }
    }

    #[test]
    fn sources_carry_the_rust_constants() {
        let src = KernelModule::DsaDecode.source();
        assert!(src.contains(&format!("#define METAPREP_DSA_TOPK {DSA_TOPK}")));
        assert!(src.contains(&format!(
            "#define METAPREP_DSA_COLS_BY_BLOCK ({DSA_COLS_BY_BLOCK})"
        )));
        assert!(
            src.contains("struct DsaArgs"),
            "DSA modules include dsa_common.cuh"
        );
        assert!(!KernelModule::DsparkDraftBlock
            .source()
            .contains("struct DsaArgs"));
    }
}
