use std::time::{Duration, Instant};

use image::{Rgb, RgbImage, Rgba, RgbaImage};

use super::*;

/// A chart-like picture: white, a grid, a one-pixel curve, blocks of "text".
fn chart(width: u32, height: u32) -> RgbImage {
    let mut image = RgbImage::from_pixel(width, height, Rgb([255, 255, 255]));
    for x in (0..width).step_by(100) {
        for y in 0..height {
            image.put_pixel(x, y, Rgb([220, 220, 220]));
        }
    }
    for x in 0..width {
        let t = f64::from(x) / f64::from(width);
        let y = (f64::from(height) * (0.5 + 0.4 * (t * 12.0).sin())) as u32;
        image.put_pixel(x, y.min(height - 1), Rgb([31, 119, 180]));
    }
    for x in (40..width.min(400)).step_by(7) {
        for y in 20..30 {
            image.put_pixel(x, y, Rgb([0, 0, 0]));
        }
    }
    image
}

/// Noise, which no encoder shrinks much: a photograph's worst case.
fn noise(width: u32, height: u32) -> RgbImage {
    let mut state = 0x2545_f491_4f6c_dd1d_u64;
    RgbImage::from_fn(width, height, |_, _| {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        let [r, g, b, ..] = state.to_le_bytes();
        Rgb([r, g, b])
    })
}

fn png_of(image: &DynamicImage) -> Vec<u8> {
    let mut out = Vec::new();
    image
        .write_to(&mut Cursor::new(&mut out), ImageFormat::Png)
        .unwrap();
    out
}

fn jpeg_of(image: &RgbImage) -> Vec<u8> {
    let mut out = Vec::new();
    JpegEncoder::new_with_quality(&mut out, 90)
        .encode_image(image)
        .unwrap();
    out
}

fn decoded(bytes: &[u8]) -> DynamicImage {
    image::load_from_memory(bytes).unwrap()
}

fn budget(max_edge: u32, max_bytes: usize) -> ImageBudget {
    ImageBudget {
        max_edge,
        max_bytes,
    }
}

#[test]
fn a_large_png_is_scaled_to_the_edge_keeping_its_aspect() {
    let png = png_of(&DynamicImage::ImageRgb8(chart(2000, 1500)));
    let started = Instant::now();
    let fitted = fit_image("image/png", &png, ImageBudget::default());
    let took = started.elapsed();
    let Fitted::Reduced {
        kind,
        bytes,
        size,
        original,
    } = fitted
    else {
        panic!("{fitted:?}")
    };
    assert_eq!(kind, ImageKind::Png);
    assert_eq!(
        original,
        Size {
            width: 2000,
            height: 1500
        }
    );
    assert_eq!(
        size,
        Size {
            width: 1568,
            height: 1176
        }
    );
    let image = decoded(&bytes);
    assert_eq!((image.width(), image.height()), (1568, 1176));
    assert!(bytes.len() <= DEFAULT_MAX_BYTES);
    eprintln!(
        "2000x1500 -> 1568x1176 PNG: {took:?} ({} bytes)",
        bytes.len()
    );
}

#[test]
fn an_image_within_the_budget_is_not_touched() {
    let png = png_of(&DynamicImage::ImageRgb8(chart(640, 480)));
    let fitted = fit_image("image/png", &png, ImageBudget::default());
    assert_eq!(
        fitted,
        Fitted::Unchanged {
            size: Size {
                width: 640,
                height: 480
            }
        }
    );
}

#[test]
fn a_jpeg_stays_a_jpeg() {
    let jpeg = jpeg_of(&chart(3000, 1000));
    let Fitted::Reduced {
        kind, bytes, size, ..
    } = fit_image("image/jpeg", &jpeg, ImageBudget::default())
    else {
        panic!()
    };
    assert_eq!(kind, ImageKind::Jpeg);
    assert_eq!(
        size,
        Size {
            width: 1568,
            height: 523
        }
    );
    assert!(bytes.starts_with(&[0xff, 0xd8, 0xff]));
    assert_eq!(decoded(&bytes).width(), 1568);
}

#[test]
fn a_photographic_png_over_the_byte_cap_becomes_a_jpeg() {
    let png = png_of(&DynamicImage::ImageRgb8(noise(1200, 900)));
    let max_bytes = 900 * 1024;
    assert!(png.len() > max_bytes);
    let Fitted::Reduced {
        kind, bytes, size, ..
    } = fit_image("image/png", &png, budget(1568, max_bytes))
    else {
        panic!()
    };
    assert_eq!(kind, ImageKind::Jpeg);
    assert!(bytes.len() <= max_bytes, "{}", bytes.len());
    assert!(size.width <= 1200);
}

#[test]
fn a_byte_cap_below_the_edge_limit_steps_the_size_down() {
    let png = png_of(&DynamicImage::ImageRgb8(noise(1000, 1000)));
    let max_bytes = 120 * 1024;
    let Fitted::Reduced { bytes, size, .. } = fit_image("image/png", &png, budget(1568, max_bytes))
    else {
        panic!()
    };
    assert!(bytes.len() <= max_bytes);
    assert!(size.width < 1000 && size.width == size.height, "{size:?}");
}

#[test]
fn an_image_that_never_fits_is_too_large() {
    let png = png_of(&DynamicImage::ImageRgb8(noise(1000, 1000)));
    let fitted = fit_image("image/png", &png, budget(1568, 1000));
    let Fitted::TooLarge { reason, original } = fitted else {
        panic!("{fitted:?}")
    };
    assert_eq!(
        original,
        Size {
            width: 1000,
            height: 1000
        }
    );
    assert!(
        reason.starts_with("it is over 1000 bytes even at "),
        "{reason}"
    );
}

#[test]
fn transparency_is_kept_as_a_png() {
    let mut image = RgbaImage::from_pixel(2000, 1000, Rgba([255, 255, 255, 0]));
    for x in 0..2000 {
        image.put_pixel(x, 500, Rgba([200, 0, 0, 255]));
    }
    let png = png_of(&DynamicImage::ImageRgba8(image));
    let Fitted::Reduced { kind, bytes, .. } = fit_image("image/png", &png, ImageBudget::default())
    else {
        panic!()
    };
    assert_eq!(kind, ImageKind::Png);
    let image = decoded(&bytes);
    assert!(image.color().has_alpha());
    assert_eq!(image.to_rgba8().get_pixel(0, 0).0[3], 0);
}

#[test]
fn opaque_rgba_is_written_as_rgb() {
    let image = DynamicImage::ImageRgb8(chart(2000, 1500)).to_rgba8();
    let png = png_of(&DynamicImage::ImageRgba8(image));
    let Fitted::Reduced { bytes, .. } = fit_image("image/png", &png, ImageBudget::default()) else {
        panic!()
    };
    assert!(!decoded(&bytes).color().has_alpha());
}

/// A PNG whose header claims `width` x `height`, with a tiny IDAT behind it.
fn png_claiming(width: u32, height: u32) -> Vec<u8> {
    fn chunk(out: &mut Vec<u8>, kind: &[u8; 4], data: &[u8]) {
        out.extend_from_slice(&(data.len() as u32).to_be_bytes());
        let start = out.len();
        out.extend_from_slice(kind);
        out.extend_from_slice(data);
        let crc = crc32(&out[start..]);
        out.extend_from_slice(&crc.to_be_bytes());
    }
    let mut out = b"\x89PNG\r\n\x1a\n".to_vec();
    let mut ihdr = Vec::new();
    ihdr.extend_from_slice(&width.to_be_bytes());
    ihdr.extend_from_slice(&height.to_be_bytes());
    ihdr.extend_from_slice(&[8, 6, 0, 0, 0]);
    chunk(&mut out, b"IHDR", &ihdr);
    // A zlib stream of a few stored zero bytes: far fewer than the header promises.
    chunk(
        &mut out,
        b"IDAT",
        &[
            0x78, 0x01, 0x01, 0x04, 0x00, 0xfb, 0xff, 0, 0, 0, 0, 0, 4, 0, 1,
        ],
    );
    chunk(&mut out, b"IEND", &[]);
    out
}

fn crc32(bytes: &[u8]) -> u32 {
    let mut crc = u32::MAX;
    for &byte in bytes {
        crc ^= u32::from(byte);
        for _ in 0..8 {
            crc = if crc & 1 == 1 {
                (crc >> 1) ^ 0xedb8_8320
            } else {
                crc >> 1
            };
        }
    }
    !crc
}

#[test]
fn a_decompression_bomb_is_refused_before_decoding() {
    let bomb = png_claiming(100_000, 100_000);
    assert!(bomb.len() < 100);
    let started = Instant::now();
    let fitted = fit_image("image/png", &bomb, ImageBudget::default());
    assert!(started.elapsed() < Duration::from_secs(1));
    let Fitted::Unreadable { reason, original } = fitted else {
        panic!("{fitted:?}")
    };
    assert_eq!(
        original,
        Some(Size {
            width: 100_000,
            height: 100_000
        })
    );
    assert!(reason.contains("pixels decoded"), "{reason}");
}

#[test]
fn corrupt_data_is_unreadable() {
    let mut png = b"\x89PNG\r\n\x1a\n".to_vec();
    png.extend_from_slice(b"not a chunk at all");
    assert!(matches!(
        fit_image("image/png", &png, ImageBudget::default()),
        Fitted::Unreadable { original: None, .. }
    ));

    let whole = png_of(&DynamicImage::ImageRgb8(noise(2000, 1500)));
    let cut = &whole[..whole.len() / 2];
    let fitted = fit_image("image/png", cut, ImageBudget::default());
    let Fitted::Unreadable { reason, original } = fitted else {
        panic!("{fitted:?}")
    };
    assert_eq!(
        original,
        Some(Size {
            width: 2000,
            height: 1500
        })
    );
    assert!(reason.starts_with("it could not be decoded"), "{reason}");

    let claims_jpeg = fit_image("image/jpeg", &whole, ImageBudget::default());
    assert!(
        matches!(&claims_jpeg, Fitted::Unreadable { reason, .. } if reason == "the data is not a jpg image"),
        "{claims_jpeg:?}"
    );
}

#[test]
fn other_types_are_left_as_they_are() {
    let fitted = fit_image("image/gif", b"GIF89a", ImageBudget::default());
    assert_eq!(
        fitted,
        Fitted::Unreadable {
            reason: "image/gif is not PNG or JPEG".into(),
            original: None
        }
    );
}

#[test]
fn sizes_keep_the_aspect_ratio() {
    let wide = Size {
        width: 10_000,
        height: 1,
    };
    assert_eq!(
        wide.within(1568),
        Size {
            width: 1568,
            height: 1
        }
    );
    let tall = Size {
        width: 1500,
        height: 2000,
    };
    assert_eq!(
        tall.within(1568),
        Size {
            width: 1176,
            height: 1568
        }
    );
    assert_eq!(tall.within(4000), tall);
}
