//! A result's images (base64, as the pool gives them) made ready for a model: each one
//! brought within the [`ImageBudget`] (`image_fit`), all of them within a total, and the
//! original of every image not sent as it is kept in a file when a directory is given.
//!
//! An image that cannot be read or made to fit is left out of what the model gets (a
//! model's API refuses an image it cannot decode or one too large, and the whole turn
//! with it), as is one that would take the result past its total; the caller says so in
//! the text, with where the original is.

use std::io::Write;
use std::path::{Path, PathBuf};

use base64::engine::general_purpose::STANDARD as BASE64;
use base64::Engine;

use super::image_fit::{
    decode_needed, fit_image, Fitted, ImageBudget, ImageKind, Size, MAX_DECODE_PIXELS,
};

/// The most bytes of image one result carries: several charts at the edge limit, and far
/// under the 10 MiB an MCP message may be once base64 adds a third.
pub const DEFAULT_MAX_TOTAL_BYTES: usize = 3 << 20;

/// The most pixels decoded to size one result's images: a few figures far past the edge
/// limit. Each image may claim up to [`MAX_DECODE_PIXELS`], and a cell can show a hundred
/// of them in a few KB each (one colour compresses to nothing), so without a total one
/// result could hold the host's CPU for minutes; past it images are left out undecoded.
pub const MAX_RESULT_DECODE_PIXELS: u64 = 100_000_000;

/// The budget of one result's images.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ResultBudget {
    pub image: ImageBudget,
    /// The most bytes of all the images sent, in order; later ones past it are left out.
    pub max_total_bytes: usize,
    /// The most pixels decoded to size them ([`MAX_RESULT_DECODE_PIXELS`]).
    pub max_decode_pixels: u64,
}

impl Default for ResultBudget {
    fn default() -> Self {
        ResultBudget {
            image: ImageBudget::default(),
            max_total_bytes: DEFAULT_MAX_TOTAL_BYTES,
            max_decode_pixels: MAX_RESULT_DECODE_PIXELS,
        }
    }
}

/// What to send of one image.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FitStatus {
    /// The original, as it was.
    Unchanged,
    /// Made smaller to fit.
    Reduced,
    /// Nothing: `reason` says why.
    Omitted,
}

impl FitStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            FitStatus::Unchanged => "unchanged",
            FitStatus::Reduced => "reduced",
            FitStatus::Omitted => "omitted",
        }
    }
}

/// The image as given.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Original {
    pub mime: String,
    pub size: Option<Size>,
    pub bytes: usize,
    /// Where it was kept, when it was not sent as it is and a directory was given.
    pub path: Option<PathBuf>,
    /// Why it could not be kept there.
    pub keep_error: Option<String>,
}

/// One image, ready to send.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FittedImage {
    pub status: FitStatus,
    /// The MIME type of `data` (the original's when omitted).
    pub mime: String,
    /// Base64; empty when omitted.
    pub data: String,
    pub size: Option<Size>,
    /// Bytes of `data` decoded.
    pub bytes: usize,
    pub original: Original,
    /// Why it was left out.
    pub reason: Option<String>,
}

/// `images` (MIME type and base64 data, in order) fitted to `budget`; the originals of
/// those not sent as they are written to `keep_dir` when given.
pub fn fit_images(
    images: &[(String, String)],
    budget: ResultBudget,
    keep_dir: Option<&Path>,
) -> Vec<FittedImage> {
    let mut room = budget.max_total_bytes;
    let mut pixels_left = budget.max_decode_pixels;
    images
        .iter()
        .map(|(mime, data)| {
            let mut fitted = fit_one(mime, data, budget, &mut pixels_left);
            if fitted.status != FitStatus::Omitted {
                if fitted.bytes <= room {
                    room -= fitted.bytes;
                } else {
                    fitted = omitted(
                        fitted.original,
                        format!(
                            "the result's images would pass {} bytes",
                            budget.max_total_bytes
                        ),
                    );
                }
            }
            if fitted.status != FitStatus::Unchanged {
                if let Some(dir) = keep_dir {
                    keep_original(&mut fitted.original, data, dir);
                }
            }
            fitted
        })
        .collect()
}

/// One image fitted, its decoded pixels counted against `pixels_left`.
fn fit_one(mime: &str, data: &str, budget: ResultBudget, pixels_left: &mut u64) -> FittedImage {
    let bytes = match decode_base64(data) {
        Ok(bytes) => bytes,
        Err(reason) => {
            let original = Original {
                mime: mime.to_string(),
                size: None,
                bytes: data.len() / 4 * 3,
                path: None,
                keep_error: None,
            };
            return omitted(original, reason);
        }
    };
    let mut original = Original {
        mime: mime.to_string(),
        size: None,
        bytes: bytes.len(),
        path: None,
        keep_error: None,
    };
    if let Some((size, true)) = decode_needed(mime, &bytes, budget.image) {
        let pixels = u64::from(size.width) * u64::from(size.height);
        if pixels <= MAX_DECODE_PIXELS {
            if pixels > *pixels_left {
                original.size = Some(size);
                let reason = format!(
                    "sizing it would take the result past the {} pixels decoded for one result",
                    budget.max_decode_pixels
                );
                return omitted(original, reason);
            }
            *pixels_left -= pixels;
        }
    }
    match fit_image(mime, &bytes, budget.image) {
        Fitted::Unchanged { size } => {
            original.size = Some(size);
            FittedImage {
                status: FitStatus::Unchanged,
                mime: mime.to_string(),
                data: data.to_string(),
                size: Some(size),
                bytes: bytes.len(),
                original,
                reason: None,
            }
        }
        Fitted::Reduced {
            kind,
            bytes: reduced,
            size,
            original: original_size,
        } => {
            original.size = Some(original_size);
            FittedImage {
                status: FitStatus::Reduced,
                mime: kind.mime().to_string(),
                data: BASE64.encode(&reduced),
                size: Some(size),
                bytes: reduced.len(),
                original,
                reason: None,
            }
        }
        Fitted::Unreadable {
            reason,
            original: size,
        } => {
            original.size = size;
            omitted(original, format!("it could not be read: {reason}"))
        }
        Fitted::TooLarge {
            reason,
            original: size,
        } => {
            original.size = Some(size);
            omitted(original, reason)
        }
    }
}

fn omitted(original: Original, reason: String) -> FittedImage {
    FittedImage {
        status: FitStatus::Omitted,
        mime: original.mime.clone(),
        data: String::new(),
        size: None,
        bytes: 0,
        original,
        reason: Some(reason),
    }
}

/// Base64 as a kernel writes it, line breaks allowed.
fn decode_base64(data: &str) -> Result<Vec<u8>, String> {
    let decoded = if data.bytes().any(|b| b.is_ascii_whitespace()) {
        let compact: String = data.chars().filter(|c| !c.is_ascii_whitespace()).collect();
        BASE64.decode(compact)
    } else {
        BASE64.decode(data)
    };
    decoded.map_err(|err| format!("its data is not base64: {err}"))
}

/// The original's bytes in a new private file of `dir`, named as the output artifacts
/// are (`image-<unix-millis>-<random>.<png|jpg|bin>`).
fn keep_original(original: &mut Original, data: &str, dir: &Path) {
    let extension = ImageKind::from_mime(&original.mime).map_or("bin", ImageKind::extension);
    let kept = decode_base64(data).and_then(|bytes| {
        let (path, mut file) = super::artifact::create_private_file(dir, "image", extension)?;
        match file.write_all(&bytes).and_then(|()| file.flush()) {
            Ok(()) => Ok(path),
            Err(err) => {
                let _ = std::fs::remove_file(&path);
                Err(format!("could not write {}: {err}", path.display()))
            }
        }
    });
    match kept {
        Ok(path) => original.path = Some(path),
        Err(error) => original.keep_error = Some(error),
    }
}

#[cfg(test)]
mod tests {
    use std::io::Cursor;

    use image::{DynamicImage, ImageFormat, RgbImage};

    use super::*;

    fn png_base64(width: u32, height: u32) -> String {
        let image = DynamicImage::ImageRgb8(RgbImage::from_fn(width, height, |x, y| {
            image::Rgb([(x % 256) as u8, (y % 256) as u8, 128])
        }));
        let mut out = Vec::new();
        image
            .write_to(&mut Cursor::new(&mut out), ImageFormat::Png)
            .unwrap();
        BASE64.encode(out)
    }

    fn png(data: String) -> (String, String) {
        ("image/png".to_string(), data)
    }

    /// A cell can show a hundred images that claim many pixels in a few bytes each; the
    /// pixels decoded for one result are bounded, the rest left out undecoded.
    #[test]
    fn the_pixels_decoded_for_one_result_are_bounded() {
        let data = png_base64(400, 300);
        let budget = ResultBudget {
            image: ImageBudget {
                max_edge: 200,
                ..ImageBudget::default()
            },
            max_decode_pixels: 250_000,
            ..ResultBudget::default()
        };
        let small = png_base64(100, 50);
        let images = [png(data.clone()), png(small), png(data.clone()), png(data)];
        let fitted = fit_images(&images, budget, None);
        let statuses: Vec<_> = fitted.iter().map(|f| f.status).collect();
        assert_eq!(
            statuses,
            [
                FitStatus::Reduced,
                FitStatus::Unchanged,
                FitStatus::Reduced,
                FitStatus::Omitted
            ]
        );
        let reason = fitted[3].reason.as_deref().unwrap();
        assert!(reason.contains("250000 pixels decoded"), "{reason}");
        assert_eq!(
            fitted[3].original.size,
            Some(Size {
                width: 400,
                height: 300
            })
        );
    }

    #[test]
    fn small_images_pass_as_they_are_and_keep_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let data = png_base64(64, 48);
        let fitted = fit_images(
            &[png(data.clone())],
            ResultBudget::default(),
            Some(dir.path()),
        );
        assert_eq!(fitted[0].status, FitStatus::Unchanged);
        assert_eq!(fitted[0].data, data);
        assert_eq!(
            fitted[0].size,
            Some(Size {
                width: 64,
                height: 48
            })
        );
        assert_eq!(fitted[0].original.path, None);
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    }

    #[test]
    fn a_reduced_image_keeps_its_original_in_a_private_file() {
        let dir = tempfile::tempdir().unwrap();
        let data = png_base64(2000, 1000);
        let fitted = fit_images(
            &[png(data.clone())],
            ResultBudget::default(),
            Some(dir.path()),
        );
        let image = &fitted[0];
        assert_eq!(image.status, FitStatus::Reduced);
        assert_eq!(
            image.size,
            Some(Size {
                width: 1568,
                height: 784
            })
        );
        assert_eq!(image.bytes, BASE64.decode(&image.data).unwrap().len());
        let path = image.original.path.as_ref().unwrap();
        let name = path.file_name().unwrap().to_str().unwrap();
        assert!(
            name.starts_with("image-") && name.ends_with(".png"),
            "{name}"
        );
        assert_eq!(std::fs::read(path).unwrap(), BASE64.decode(&data).unwrap());
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(path).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o600);
        }
    }

    #[test]
    fn images_past_the_total_are_left_out() {
        let data = png_base64(200, 200);
        let one = BASE64.decode(&data).unwrap().len();
        let budget = ResultBudget {
            max_total_bytes: one * 2,
            ..ResultBudget::default()
        };
        let fitted = fit_images(
            &[png(data.clone()), png(data.clone()), png(data)],
            budget,
            None,
        );
        let statuses: Vec<_> = fitted.iter().map(|image| image.status).collect();
        assert_eq!(
            statuses,
            [
                FitStatus::Unchanged,
                FitStatus::Unchanged,
                FitStatus::Omitted
            ]
        );
        assert!(fitted[2].data.is_empty());
        let reason = fitted[2].reason.as_deref().unwrap();
        assert_eq!(
            reason,
            format!("the result's images would pass {} bytes", one * 2)
        );
    }

    #[test]
    fn unreadable_images_are_left_out_with_a_reason() {
        let dir = tempfile::tempdir().unwrap();
        let images = [
            png("not base64!".into()),
            png(BASE64.encode(b"\x89PNG\r\n\x1a\nxx")),
        ];
        let fitted = fit_images(&images, ResultBudget::default(), Some(dir.path()));
        assert!(fitted
            .iter()
            .all(|image| image.status == FitStatus::Omitted));
        assert!(fitted[0]
            .reason
            .as_deref()
            .unwrap()
            .starts_with("its data is not base64"));
        assert!(fitted[0].original.keep_error.is_some());
        assert!(fitted[1]
            .reason
            .as_deref()
            .unwrap()
            .starts_with("it could not be read: "));
        assert!(fitted[1].original.path.is_some());
    }

    #[test]
    fn line_breaks_in_base64_are_read() {
        let data = png_base64(10, 10);
        let wrapped: String = data
            .as_bytes()
            .chunks(76)
            .map(|line| format!("{}\n", std::str::from_utf8(line).unwrap()))
            .collect();
        let fitted = fit_images(&[png(wrapped)], ResultBudget::default(), None);
        assert_eq!(fitted[0].status, FitStatus::Unchanged);
    }
}
