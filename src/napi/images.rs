//! JavaScript surface of `output::fit_images`: `fitImages`, images sized for a model.
//! Argument conversion and delegation only; the work runs off the JavaScript thread.

use napi::bindgen_prelude::*;
use napi_derive::napi;

use super::args::{self, convert, convert_optional};
use super::options::optional_integer;
use super::signatures as sig;
use super::{blocking, host_path, promise, rejected};
use crate::error::KernelError;
use crate::output::{self, FittedImage, ImageBudget, ResultBudget};

#[napi(object)]
pub struct ImageToFit {
    /// `image/png` and `image/jpeg` are sized; any other type is left out.
    pub mime: String,
    /// Base64.
    pub data: String,
}

#[napi(object)]
pub struct FitImagesOptions {
    /// The most pixels on an image's long side, an integer from 16 to 16384. @default 1568
    pub max_edge: Option<f64>,
    /// The most bytes of one image (decoded, base64 adds a third), an integer from 1024
    /// to 64 MiB. @default 1048576
    pub max_bytes: Option<f64>,
    /// The most bytes of all the images sent, in order; later ones are left out. An
    /// integer from 1024 to 64 MiB. @default 3145728
    pub max_total_bytes: Option<f64>,
    /// Where the originals of images not sent as they are are kept, each a new 0600 file
    /// `image-<millis>-<random>.png` (or `.jpg`); checked and created as `artifactsDir`
    /// is. Without it no original is written.
    pub keep_originals_in: Option<String>,
}

#[napi(object)]
pub struct OriginalImage {
    pub mime: String,
    /// Absent when the header could not be read.
    pub width: Option<u32>,
    pub height: Option<u32>,
    pub bytes: f64,
    /// The file that holds it, when it was kept.
    pub path: Option<String>,
    /// Why it could not be kept in `keepOriginalsIn`.
    pub keep_error: Option<String>,
}

#[napi(object)]
pub struct FittedImageResult {
    /// `unchanged`: `data` is the original; `reduced`: made smaller to fit;
    /// `omitted`: nothing to send, `reason` says why.
    #[napi(ts_type = "'unchanged' | 'reduced' | 'omitted'")]
    pub status: String,
    /// The MIME type of `data` (the original's when omitted).
    pub mime: String,
    /// Base64; empty when omitted.
    pub data: String,
    pub width: Option<u32>,
    pub height: Option<u32>,
    /// Bytes of `data` decoded.
    pub bytes: f64,
    pub original: OriginalImage,
    pub reason: Option<String>,
}

/// The most a byte option may be.
const MAX_BYTES_OPTION: u64 = 64 << 20;

fn budget_of(options: &FitImagesOptions) -> std::result::Result<ResultBudget, KernelError> {
    let defaults = ResultBudget::default();
    let max_edge = optional_integer("maxEdge", options.max_edge, (16, 16_384))?;
    let max_bytes = optional_integer("maxBytes", options.max_bytes, (1024, MAX_BYTES_OPTION))?;
    let max_total = optional_integer(
        "maxTotalBytes",
        options.max_total_bytes,
        (1024, MAX_BYTES_OPTION),
    )?;
    Ok(ResultBudget {
        image: ImageBudget {
            max_edge: max_edge.map_or(defaults.image.max_edge, |n| n as u32),
            max_bytes: max_bytes.map_or(defaults.image.max_bytes, |n| n as usize),
        },
        max_total_bytes: max_total.map_or(defaults.max_total_bytes, |n| n as usize),
        ..defaults
    })
}

fn result_of(image: FittedImage) -> FittedImageResult {
    let original = image.original;
    FittedImageResult {
        status: image.status.as_str().to_string(),
        mime: image.mime,
        data: image.data,
        width: image.size.map(|size| size.width),
        height: image.size.map(|size| size.height),
        bytes: image.bytes as f64,
        original: OriginalImage {
            mime: original.mime,
            width: original.size.map(|size| size.width),
            height: original.size.map(|size| size.height),
            bytes: original.bytes as f64,
            path: original.path.map(|path| path.display().to_string()),
            keep_error: original.keep_error,
        },
        reason: image.reason,
    }
}

/// Sizes images for a model (docs/charts.md#images-sized-for-the-model): each within
/// `maxEdge` pixels and `maxBytes`, all within `maxTotalBytes`; an image within the budget
/// is returned as it is, one past it scaled down (a PNG stays a PNG unless only a JPEG
/// fits), one unreadable or that cannot fit is `omitted` with a reason. Runs off the
/// JavaScript thread.
#[napi(
    ts_args_type = "images: ImageToFit[], options?: FitImagesOptions | undefined | null",
    ts_return_type = "Promise<FittedImageResult[]>"
)]
pub fn fit_images<'env>(
    env: &'env Env,
    images: Unknown<'env>,
    options: Option<Unknown<'env>>,
) -> Result<PromiseRaw<'env, Vec<FittedImageResult>>> {
    let parsed = args::check(env, sig::FIT_IMAGES, &[Some(images), options]).and_then(|()| {
        let images: Vec<ImageToFit> = convert("images", images)?;
        let options: Option<FitImagesOptions> = convert_optional("options", options)?;
        let budget = options
            .as_ref()
            .map_or(Ok(ResultBudget::default()), budget_of)?;
        let keep_dir = options
            .and_then(|options| options.keep_originals_in)
            .map(host_path);
        Ok((images, budget, keep_dir))
    });
    let (images, budget, keep_dir) = match parsed {
        Ok(parsed) => parsed,
        Err(err) => return rejected(env, err),
    };
    promise(env, async move {
        blocking(move || {
            let images: Vec<(String, String)> = images
                .into_iter()
                .map(|image| (image.mime, image.data))
                .collect();
            let fitted = output::fit_images(&images, budget, keep_dir.as_deref());
            Ok(fitted.into_iter().map(result_of).collect())
        })
        .await
    })
}
