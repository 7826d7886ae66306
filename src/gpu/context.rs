//! The CUDA context, the one stream everything runs on, device facts, and the NVRTC module
//! cache.

use super::buffer::DeviceBuffer;
use super::event::Event;
use super::image::{ImageChoice, KernelImage};
use super::kernels::KernelModule;
use super::nvrtc;
use super::probe::{cuda_version, require_driver, require_nvrtc, GpuUnavailable};
use super::sync_mode::SyncMode;
use anyhow::{Context, Result};
use cudarc::driver::sys::CUdevice_attribute as Attr;
use cudarc::driver::{sys, CudaContext, CudaFunction, CudaModule, CudaStream};
use cudarc::driver::{DeviceRepr, ValidAsZeroBits};
use serde::Serialize;
use std::cell::RefCell;
use std::collections::HashMap;
use std::marker::PhantomData;
use std::sync::Arc;

#[derive(Debug, Clone, Serialize)]
pub struct DeviceInfo {
    pub ordinal: usize,
    /// NVML's name for this device ([`probe::pci_bus_id`](super::probe::pci_bus_id)).
    pub pci_bus_id: String,
    pub name: String,
    pub compute_capability: (i32, i32),
    pub sm_count: u32,
    pub l2_bytes: u64,
    pub memory_bytes: u64,
    /// e.g. "13.0": the CUDA version the driver supports.
    pub cuda_driver_version: String,
    pub nvrtc_version: String,
    pub device_count: u32,
    /// What every module is compiled to: a cubin for this device, or PTX.
    pub kernel_image: KernelImage,
    /// How the host waits in a synchronise ([`SyncMode::apply`]).
    pub sync: SyncMode,
}

pub struct Gpu {
    pub ctx: Arc<CudaContext>,
    pub stream: Arc<CudaStream>,
    pub info: DeviceInfo,
    modules: RefCell<HashMap<KernelModule, Arc<CudaModule>>>,
}

/// Which GPU a command runs on and how it is opened: what `--device`, `--kernel-image` and
/// `--sync` say. The default is device 0 as the driver and NVRTC would have it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
pub struct GpuChoice {
    /// CUDA device ordinal (a rank's GPU is this plus its rank).
    pub ordinal: usize,
    pub image: ImageChoice,
    pub sync: SyncMode,
}

impl GpuChoice {
    /// Opens the chosen GPU ([`Gpu::open_with`]).
    pub fn open(&self) -> Result<Gpu> {
        Gpu::open_with(self.ordinal, self.image, self.sync)
    }

    /// The same choice for rank `rank`, which runs on the `rank`-th GPU from this one.
    pub fn for_rank(self, rank: usize) -> Self {
        Self {
            ordinal: self.ordinal + rank,
            ..self
        }
    }
}

impl Gpu {
    /// Opens device `ordinal`, its kernels compiled to a cubin where NVRTC knows the device.
    pub fn open(ordinal: usize) -> Result<Self> {
        Self::open_with(ordinal, ImageChoice::Auto, SyncMode::Auto)
    }

    /// Opens device `ordinal`, its kernels compiled as `image` asks, the host waiting in a
    /// synchronise as `sync` says. Missing driver, NVRTC or device is a `GpuUnavailable` error.
    pub fn open_with(ordinal: usize, image: ImageChoice, sync: SyncMode) -> Result<Self> {
        require_driver()?;
        require_nvrtc()?;
        // SAFETY: the library is present (probed above), so cudarc will not panic loading it.
        let device_count = match CudaContext::device_count() {
            Ok(n) => n.max(0) as u32,
            Err(e) => {
                return Err(GpuUnavailable(format!(
                    "no CUDA device found: the driver answered {e}"
                ))
                .into())
            }
        };
        if device_count as usize <= ordinal {
            return Err(GpuUnavailable(format!(
                "no CUDA device {ordinal}: the driver sees {device_count} device(s)"
            ))
            .into());
        }
        let ctx = CudaContext::new(ordinal)
            .with_context(|| format!("creating a context on device {ordinal}"))?;
        // With several streams, cudarc's event tracking makes launches wait on events recorded
        // outside a capture (CUDA_ERROR_STREAM_CAPTURE_ISOLATION); we order streams ourselves.
        // SAFETY: no buffer exists yet, so no tracked event is pending.
        unsafe { ctx.disable_event_tracking() };
        let mut driver = 0;
        // SAFETY: a plain out-parameter query; the driver was probed above.
        unsafe { sys::cuDriverGetVersion(&mut driver) }
            .result()
            .context("reading the driver's CUDA version")?;
        sync.apply(&ctx, driver)?;
        let stream = ctx.new_stream().context("creating a stream")?;
        let attr = |a| {
            ctx.attribute(a)
                .with_context(|| format!("reading device attribute {a:?}"))
        };
        let (nvrtc_major, nvrtc_minor) = nvrtc::version()?;
        let nvrtc = format!("{nvrtc_major}.{nvrtc_minor}");
        let compute_capability = ctx
            .compute_capability()
            .context("reading the compute capability")?;
        let kernel_image = KernelImage::choose(
            image,
            compute_capability,
            &nvrtc::supported_archs()?,
            &nvrtc,
            &cuda_version(driver),
        )?;
        let info = DeviceInfo {
            ordinal,
            // From the open context, as the other attributes: probe::pci_bus_id would look
            // the device up again.
            pci_bus_id: super::probe::pci_bus_id_text(
                attr(Attr::CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID)?,
                attr(Attr::CU_DEVICE_ATTRIBUTE_PCI_BUS_ID)?,
                attr(Attr::CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID)?,
            ),
            name: ctx.name().context("reading the device name")?,
            compute_capability,
            sm_count: attr(Attr::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)? as u32,
            l2_bytes: attr(Attr::CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE)? as u64,
            memory_bytes: ctx.total_mem().context("reading total memory")? as u64,
            cuda_driver_version: cuda_version(driver),
            nvrtc_version: nvrtc,
            device_count,
            kernel_image,
            sync,
        };
        Ok(Self {
            ctx,
            stream,
            info,
            modules: RefCell::new(HashMap::new()),
        })
    }

    /// The stream, as a launch takes it.
    pub fn cu_stream(&self) -> StreamHandle<'_> {
        StreamHandle::of(&self.stream)
    }

    /// `module`, compiled to the run's kernel image and loaded on first use.
    pub fn module(&self, module: KernelModule) -> Result<Arc<CudaModule>> {
        if let Some(m) = self.modules.borrow().get(&module) {
            return Ok(m.clone());
        }
        let image = &self.info.kernel_image;
        let m = self.ctx.load_module(module.compile(image)?).map_err(|e| {
            if e.0 == sys::CUresult::CUDA_ERROR_UNSUPPORTED_PTX_VERSION {
                anyhow::anyhow!(image.unsupported_ptx(module.file_name()))
            } else {
                anyhow::anyhow!("loading kernels/{} ({image}): {e}", module.file_name())
            }
        })?;
        self.modules.borrow_mut().insert(module, m.clone());
        Ok(m)
    }

    /// A kernel from `module`, compiling and loading the module on first use.
    pub fn function(&self, module: KernelModule, name: &str) -> Result<CudaFunction> {
        self.module(module)?
            .load_function(name)
            .with_context(|| format!("kernel {name} not found in kernels/{}", module.file_name()))
    }

    pub fn upload<T: DeviceRepr>(&self, host: &[T]) -> Result<DeviceBuffer<T>> {
        self.stream
            .clone_htod(host)
            .map(DeviceBuffer::new)
            .context("copying inputs to the device")
    }

    pub fn alloc<T: DeviceRepr + ValidAsZeroBits>(&self, len: usize) -> Result<DeviceBuffer<T>> {
        let zeroed = self.stream.alloc_zeros(len.max(1));
        zeroed.map(DeviceBuffer::new).map_err(|e| {
            let bytes = len.max(1) * std::mem::size_of::<T>();
            let free = match self.ctx.mem_get_info() {
                Ok((free, total)) => {
                    format!("{} of {} MiB free on the device", free >> 20, total >> 20)
                }
                Err(_) => "free memory unknown".into(),
            };
            anyhow::anyhow!(
                "allocating {} MiB ({len} elements) on the device ({free}): {e}",
                bytes.div_ceil(1 << 20)
            )
        })
    }

    /// Copies a device buffer to the host, refusing to do so inside a capture.
    pub fn download<T: DeviceRepr>(&self, what: &str, buf: &DeviceBuffer<T>) -> Result<Vec<T>> {
        super::ensure_not_capturing(&self.stream, what)?;
        self.stream
            .clone_dtoh(buf.slice())
            .with_context(|| format!("copying {what} to the host"))
    }

    /// `n` events that record timestamps. cudarc's `new_event(None)` disables timing, so
    /// every timed measurement goes through here.
    pub fn timing_events(&self, n: usize) -> Result<Vec<Event>> {
        let flags = Some(sys::CUevent_flags::CU_EVENT_DEFAULT);
        (0..n)
            .map(|_| Event::new(&self.ctx, flags).context("creating a timing event"))
            .collect()
    }

    /// `n` events without timing (cudarc's default, PyTorch's `torch.cuda.Event()`): for
    /// waiting on work, the cheaper event.
    pub fn plain_events(&self, n: usize) -> Result<Vec<Event>> {
        (0..n)
            .map(|_| Event::new(&self.ctx, None).context("creating an event"))
            .collect()
    }

    pub fn sync(&self) -> Result<()> {
        self.stream
            .synchronize()
            .context("synchronising the stream (a kernel may have faulted)")
    }
}

/// The run's stream as a launch takes it: the raw handle, borrowed from the stream's owner
/// (the [`Gpu`]), so that it cannot outlive the stream.
#[derive(Clone, Copy)]
pub struct StreamHandle<'s> {
    raw: sys::CUstream,
    _stream: PhantomData<&'s CudaStream>,
}

impl<'s> StreamHandle<'s> {
    pub(crate) fn of(stream: &'s CudaStream) -> Self {
        Self {
            raw: stream.cu_stream(),
            _stream: PhantomData,
        }
    }

    pub(crate) fn raw(self) -> sys::CUstream {
        self.raw
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_ranks_choice_is_the_next_gpus_opened_the_same_way() {
        let first = GpuChoice {
            ordinal: 2,
            image: ImageChoice::Ptx,
            sync: SyncMode::Spin,
        };
        assert_eq!(
            first.for_rank(3),
            GpuChoice {
                ordinal: 5,
                ..first
            }
        );
        assert_eq!(first.for_rank(0), first);
        assert_eq!(GpuChoice::default().ordinal, 0);
    }
}
