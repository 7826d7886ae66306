//! The NCCL entry points metaprep calls, loaded from one library file: a thin layer of
//! function pointers with NCCL's C signatures (nccl.h, stable across NCCL 2.x).

use anyhow::{Context, Result};
use cudarc::driver::sys::CUstream;
use std::ffi::{c_char, c_int, c_void, CStr};
use std::path::Path;

pub type NcclResult = c_int;
pub type RawComm = *mut c_void;
pub const NCCL_SUCCESS: NcclResult = 0;

/// `ncclDataType_t` values used here.
pub const NCCL_FLOAT64: c_int = 8;
pub const NCCL_BFLOAT16: c_int = 9;
/// `ncclRedOp_t` values used here.
pub const NCCL_SUM: c_int = 0;
pub const NCCL_MAX: c_int = 2;

/// `ncclUniqueId`: 128 opaque bytes that rank 0 makes and every rank joins with.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct UniqueId {
    pub internal: [c_char; 128],
}

type GetVersion = unsafe extern "C" fn(*mut c_int) -> NcclResult;
type GetUniqueId = unsafe extern "C" fn(*mut UniqueId) -> NcclResult;
type CommInitRank = unsafe extern "C" fn(*mut RawComm, c_int, UniqueId, c_int) -> NcclResult;
type CommDestroy = unsafe extern "C" fn(RawComm) -> NcclResult;
type GetErrorString = unsafe extern "C" fn(NcclResult) -> *const c_char;
type AllReduce = unsafe extern "C" fn(
    *const c_void,
    *mut c_void,
    usize,
    c_int,
    c_int,
    RawComm,
    CUstream,
) -> NcclResult;
type Send =
    unsafe extern "C" fn(*const c_void, usize, c_int, c_int, RawComm, CUstream) -> NcclResult;
type Recv = unsafe extern "C" fn(*mut c_void, usize, c_int, c_int, RawComm, CUstream) -> NcclResult;
type Group = unsafe extern "C" fn() -> NcclResult;

/// The loaded library and its entry points. The pointers stay valid while `_lib` lives.
pub struct RawNccl {
    pub get_version: GetVersion,
    pub get_unique_id: GetUniqueId,
    pub comm_init_rank: CommInitRank,
    pub comm_destroy: CommDestroy,
    get_error_string: GetErrorString,
    pub all_reduce: AllReduce,
    pub send: Send,
    pub recv: Recv,
    pub group_start: Group,
    pub group_end: Group,
    _lib: libloading::Library,
}

impl RawNccl {
    /// Opens `path` and resolves every entry point; a missing one is an error naming it.
    pub fn open(path: &Path) -> Result<Self> {
        // SAFETY: loading NCCL runs only its (side-effect free) library constructors.
        let lib = unsafe { libloading::Library::new(path) }
            .with_context(|| format!("loading {}", path.display()))?;
        // SAFETY: each symbol is read with the type nccl.h declares for it.
        unsafe {
            macro_rules! sym {
                ($name:literal) => {
                    *lib.get(concat!($name, "\0").as_bytes()).with_context(|| {
                        format!(
                            "{} has no {}: not an NCCL 2.x library",
                            path.display(),
                            $name
                        )
                    })?
                };
            }
            Ok(RawNccl {
                get_version: sym!("ncclGetVersion"),
                get_unique_id: sym!("ncclGetUniqueId"),
                comm_init_rank: sym!("ncclCommInitRank"),
                comm_destroy: sym!("ncclCommDestroy"),
                get_error_string: sym!("ncclGetErrorString"),
                all_reduce: sym!("ncclAllReduce"),
                send: sym!("ncclSend"),
                recv: sym!("ncclRecv"),
                group_start: sym!("ncclGroupStart"),
                group_end: sym!("ncclGroupEnd"),
                _lib: lib,
            })
        }
    }

    /// `Ok` for success, else an error with NCCL's own text and `what` was being done.
    pub fn check(&self, code: NcclResult, what: &str) -> Result<()> {
        if code == NCCL_SUCCESS {
            return Ok(());
        }
        // SAFETY: ncclGetErrorString returns a static NUL-terminated string for any code.
        let text = unsafe { CStr::from_ptr((self.get_error_string)(code)) };
        anyhow::bail!(
            "NCCL {what} failed: {} (code {code})",
            text.to_string_lossy()
        )
    }
}
