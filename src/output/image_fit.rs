//! One image brought within a budget for a model: at most `max_edge` pixels on its long
//! side and `max_bytes` bytes (docs/charts.md#images-sized-for-the-model says why these).
//!
//! An image already within the budget is never decoded: it is sent byte for byte. One
//! past it is decoded, scaled down keeping its aspect ratio and encoded again: a PNG as a
//! PNG (charts are flat colour, thin lines and text, which PNG keeps sharp and small),
//! a JPEG as a JPEG. When a PNG at the edge limit is still over `max_bytes` it is
//! photographic content, which JPEG holds in a fraction of the bytes, so an opaque one
//! becomes a JPEG; one with transparency stays a PNG, as JPEG has no alpha. Past that
//! the size is stepped down (three quarters each time) to [`MIN_EDGE`]; an image still
//! too large there is given up on.
//!
//! Decoding is bounded before it starts: the header's dimensions are read first, and an
//! image of more than [`MAX_DECODE_PIXELS`] (a decompression bomb claims 100000x100000
//! in a few KB) is refused with a reason, as are corrupt data and types other than PNG
//! and JPEG; the decoder's own allocation limit backs that up.

use std::io::Cursor;

use image::codecs::jpeg::JpegEncoder;
use image::codecs::png::{CompressionType, FilterType as PngFilter, PngEncoder};
use image::{DynamicImage, ExtendedColorType, ImageEncoder, ImageFormat, ImageReader, Limits};

/// What an image may be for the model.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ImageBudget {
    /// The most pixels on the long side.
    pub max_edge: u32,
    /// The most bytes of the encoded image (base64 adds a third).
    pub max_bytes: usize,
}

/// Claude scales a longer edge down to this (and OpenAI fits 2048, then 768 on the short
/// side): more pixels cost bytes and time and show the model nothing more.
pub const DEFAULT_MAX_EDGE: u32 = 1568;
/// Far under the 5 MB an Anthropic API image may be, and what a chart at the edge limit
/// never needs; a photograph past it is sent as a JPEG.
pub const DEFAULT_MAX_BYTES: usize = 1 << 20;

impl Default for ImageBudget {
    fn default() -> Self {
        ImageBudget {
            max_edge: DEFAULT_MAX_EDGE,
            max_bytes: DEFAULT_MAX_BYTES,
        }
    }
}

/// The smallest long side worth sending: below it a chart's text is unreadable, and the
/// image is left out instead.
pub const MIN_EDGE: u32 = 256;

/// The most pixels decoded (an 8000x5000 image; 160 MB as RGBA).
pub const MAX_DECODE_PIXELS: u64 = 40_000_000;

/// What the decoder may allocate: the image at 16 bits per channel, and some room.
const MAX_DECODE_ALLOC: u64 = MAX_DECODE_PIXELS * 8 + (16 << 20);

/// Where a JPEG trades size for detail without visible blocks around text.
const JPEG_QUALITY: u8 = 85;

/// Each further step down keeps this share of the edge.
const STEP: f64 = 0.75;

/// An image's width and height in pixels.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Size {
    pub width: u32,
    pub height: u32,
}

impl Size {
    fn long_edge(self) -> u32 {
        self.width.max(self.height)
    }

    /// This size scaled so its long side is at most `edge`, the aspect ratio kept (and
    /// each side at least one pixel).
    fn within(self, edge: u32) -> Size {
        if self.long_edge() <= edge {
            return self;
        }
        let scale = f64::from(edge) / f64::from(self.long_edge());
        let side = |n: u32| ((f64::from(n) * scale).round() as u32).clamp(1, edge);
        Size {
            width: side(self.width),
            height: side(self.height),
        }
    }
}

/// The encodings this module reads and writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ImageKind {
    Png,
    Jpeg,
}

impl ImageKind {
    pub fn from_mime(mime: &str) -> Option<ImageKind> {
        match mime {
            "image/png" => Some(ImageKind::Png),
            "image/jpeg" => Some(ImageKind::Jpeg),
            _ => None,
        }
    }

    pub fn mime(self) -> &'static str {
        match self {
            ImageKind::Png => "image/png",
            ImageKind::Jpeg => "image/jpeg",
        }
    }

    pub fn extension(self) -> &'static str {
        match self {
            ImageKind::Png => "png",
            ImageKind::Jpeg => "jpg",
        }
    }

    /// Whether `bytes` start as this encoding does: a PNG labelled JPEG is corrupt data
    /// to a model's API.
    fn matches(self, bytes: &[u8]) -> bool {
        match self {
            ImageKind::Png => bytes.starts_with(b"\x89PNG\r\n\x1a\n"),
            ImageKind::Jpeg => bytes.starts_with(&[0xff, 0xd8, 0xff]),
        }
    }

    fn format(self) -> ImageFormat {
        match self {
            ImageKind::Png => ImageFormat::Png,
            ImageKind::Jpeg => ImageFormat::Jpeg,
        }
    }
}

/// What became of one image.
#[derive(Debug, PartialEq, Eq)]
pub enum Fitted {
    /// Within the budget: send the original bytes.
    Unchanged { size: Size },
    /// Made to fit: send `bytes`.
    Reduced {
        kind: ImageKind,
        bytes: Vec<u8>,
        size: Size,
        original: Size,
    },
    /// Not read, so left as it is: not PNG or JPEG, corrupt, or past the decode limit.
    Unreadable {
        reason: String,
        original: Option<Size>,
    },
    /// Read, but over `max_bytes` even at [`MIN_EDGE`].
    TooLarge { reason: String, original: Size },
}

/// `bytes`, labelled `mime`, brought within `budget`.
pub fn fit_image(mime: &str, bytes: &[u8], budget: ImageBudget) -> Fitted {
    let Some(kind) = ImageKind::from_mime(mime) else {
        return unreadable(format!("{mime} is not PNG or JPEG"), None);
    };
    if !kind.matches(bytes) {
        return unreadable(
            format!("the data is not a {} image", kind.extension()),
            None,
        );
    }
    let size = match header_size(kind, bytes) {
        Ok(size) => size,
        Err(reason) => return unreadable(reason, None),
    };
    if size.long_edge() <= budget.max_edge && bytes.len() <= budget.max_bytes {
        return Fitted::Unchanged { size };
    }
    let pixels = u64::from(size.width) * u64::from(size.height);
    if pixels > MAX_DECODE_PIXELS {
        let reason = format!(
            "{}x{} is more than the {MAX_DECODE_PIXELS} pixels decoded",
            size.width, size.height
        );
        return unreadable(reason, Some(size));
    }
    let image = match decode(kind, bytes) {
        Ok(image) => image,
        Err(reason) => return unreadable(reason, Some(size)),
    };
    reduce(kind, &image, size, budget)
}

/// The size `bytes` claim, read from the header alone, and whether [`fit_image`] would
/// decode them to bring them within `budget`; None when they are not a PNG or JPEG whose
/// header reads.
pub fn decode_needed(mime: &str, bytes: &[u8], budget: ImageBudget) -> Option<(Size, bool)> {
    let kind = ImageKind::from_mime(mime)?;
    if !kind.matches(bytes) {
        return None;
    }
    let size = header_size(kind, bytes).ok()?;
    Some((
        size,
        size.long_edge() > budget.max_edge || bytes.len() > budget.max_bytes,
    ))
}

fn unreadable(reason: String, original: Option<Size>) -> Fitted {
    Fitted::Unreadable { reason, original }
}

fn reader(kind: ImageKind, bytes: &[u8]) -> ImageReader<Cursor<&[u8]>> {
    let mut limits = Limits::default();
    limits.max_alloc = Some(MAX_DECODE_ALLOC);
    let mut reader = ImageReader::with_format(Cursor::new(bytes), kind.format());
    reader.limits(limits);
    reader
}

/// The dimensions the header claims, without decoding a pixel.
fn header_size(kind: ImageKind, bytes: &[u8]) -> Result<Size, String> {
    let (width, height) = reader(kind, bytes)
        .into_dimensions()
        .map_err(|err| format!("its header could not be read: {err}"))?;
    if width == 0 || height == 0 {
        return Err(format!("it claims {width}x{height} pixels"));
    }
    Ok(Size { width, height })
}

fn decode(kind: ImageKind, bytes: &[u8]) -> Result<DynamicImage, String> {
    reader(kind, bytes)
        .decode()
        .map_err(|err| format!("it could not be decoded: {err}"))
}

/// The pixels to encode: RGBA only when some pixel is not opaque (matplotlib writes
/// RGBA with every alpha 255; RGB is a quarter smaller and may become a JPEG).
enum Pixels {
    Rgb(image::RgbImage),
    Rgba(image::RgbaImage),
}

fn pixels_of(image: &DynamicImage) -> Pixels {
    if image.color().has_alpha() {
        let rgba = image.to_rgba8();
        if rgba.pixels().any(|pixel| pixel.0[3] != u8::MAX) {
            return Pixels::Rgba(rgba);
        }
    }
    Pixels::Rgb(image.to_rgb8())
}

impl Pixels {
    /// Scaled to `size` (SIMD convolution: a tenth of `image::imageops::resize`'s time;
    /// alpha premultiplied, so transparent pixels bleed no colour into their edges). The
    /// resizer is built for RGBA only (its other pixel types would add megabytes to the
    /// addon), so RGB goes through RGBA.
    fn resized(&self, size: Size) -> Result<Pixels, String> {
        use fast_image_resize::images::{Image, ImageRef};
        use fast_image_resize::{PixelType, ResizeAlg, ResizeOptions, Resizer};

        let from = self.size();
        let widened;
        let (raw, opaque) = match self {
            Pixels::Rgb(image) => {
                widened = DynamicImage::ImageRgb8(image.clone()).into_rgba8();
                (widened.as_raw(), true)
            }
            Pixels::Rgba(image) => (image.as_raw(), false),
        };
        let failed = |err: &dyn std::fmt::Display| format!("it could not be scaled: {err}");
        let source = ImageRef::new(from.width, from.height, raw, PixelType::U8x4)
            .map_err(|err| failed(&err))?;
        let mut target = Image::new(size.width, size.height, PixelType::U8x4);
        // Lanczos3 keeps a chart's one-pixel lines and small text legible where a
        // bilinear filter blurs them.
        let options = ResizeOptions::new()
            .resize_alg(ResizeAlg::Convolution(
                fast_image_resize::FilterType::Lanczos3,
            ))
            .use_alpha(!opaque);
        Resizer::new()
            .resize(&source, &mut target, &options)
            .map_err(|err| failed(&err))?;
        let scaled = image::RgbaImage::from_raw(size.width, size.height, target.into_vec())
            .ok_or_else(|| failed(&"the scaled buffer has the wrong size"))?;
        Ok(if opaque {
            Pixels::Rgb(DynamicImage::ImageRgba8(scaled).into_rgb8())
        } else {
            Pixels::Rgba(scaled)
        })
    }

    fn size(&self) -> Size {
        let (width, height) = match self {
            Pixels::Rgb(image) => image.dimensions(),
            Pixels::Rgba(image) => image.dimensions(),
        };
        Size { width, height }
    }

    /// Encoded as `kind`; a PNG first with fast compression (a tenth of the default's
    /// time, some 10% larger), and with the default only when that is over `max_bytes`.
    fn encode(&self, kind: ImageKind, max_bytes: usize) -> Result<Vec<u8>, String> {
        let size = self.size();
        let (raw, color): (&[u8], _) = match self {
            Pixels::Rgb(image) => (image.as_raw(), ExtendedColorType::Rgb8),
            Pixels::Rgba(image) => (image.as_raw(), ExtendedColorType::Rgba8),
        };
        let png = |compression| {
            let mut out = Vec::new();
            PngEncoder::new_with_quality(&mut out, compression, PngFilter::Adaptive)
                .write_image(raw, size.width, size.height, color)
                .map(|()| out)
        };
        let encoded = match kind {
            ImageKind::Png => png(CompressionType::Fast).and_then(|fast| {
                if fast.len() <= max_bytes {
                    Ok(fast)
                } else {
                    png(CompressionType::Default)
                }
            }),
            ImageKind::Jpeg => {
                let mut out = Vec::new();
                JpegEncoder::new_with_quality(&mut out, JPEG_QUALITY)
                    .write_image(raw, size.width, size.height, color)
                    .map(|()| out)
            }
        };
        encoded.map_err(|err| format!("it could not be encoded again: {err}"))
    }
}

/// Scaled to the edge limit, then (over `max_bytes`) a JPEG when it may be one, then
/// smaller steps down to [`MIN_EDGE`].
fn reduce(kind: ImageKind, image: &DynamicImage, original: Size, budget: ImageBudget) -> Fitted {
    let pixels = pixels_of(image);
    let may_be_jpeg = matches!(pixels, Pixels::Rgb(_));
    let mut target = original.within(budget.max_edge.max(1));
    let mut kinds = vec![kind];
    loop {
        let scaled = if target == original {
            None
        } else {
            match pixels.resized(target) {
                Ok(scaled) => Some(scaled),
                Err(reason) => return unreadable(reason, Some(original)),
            }
        };
        let scaled = scaled.as_ref().unwrap_or(&pixels);
        for &out_kind in &kinds {
            let bytes = match scaled.encode(out_kind, budget.max_bytes) {
                Ok(bytes) => bytes,
                Err(reason) => return unreadable(reason, Some(original)),
            };
            if bytes.len() <= budget.max_bytes {
                return Fitted::Reduced {
                    kind: out_kind,
                    bytes,
                    size: target,
                    original,
                };
            }
        }
        // A PNG over the byte cap at the edge limit is photographic: JPEG from here on.
        if kinds == [ImageKind::Png] && may_be_jpeg {
            kinds = vec![ImageKind::Jpeg];
            let bytes = scaled.encode(ImageKind::Jpeg, budget.max_bytes);
            if let Ok(bytes) = bytes {
                if bytes.len() <= budget.max_bytes {
                    return Fitted::Reduced {
                        kind: ImageKind::Jpeg,
                        bytes,
                        size: target,
                        original,
                    };
                }
            }
        }
        let next = (f64::from(target.long_edge()) * STEP).round() as u32;
        if next < MIN_EDGE.min(original.long_edge()) || next >= target.long_edge() {
            let reason = format!(
                "it is over {} bytes even at {}x{}",
                budget.max_bytes, target.width, target.height
            );
            return Fitted::TooLarge { reason, original };
        }
        target = original.within(next);
    }
}

#[cfg(test)]
#[path = "image_fit_tests.rs"]
mod tests;
