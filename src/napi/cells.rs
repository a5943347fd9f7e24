//! The cells of an `evaluate` or `KernelPool.execute` call: their own timeouts (clamped
//! as the pool's `timeoutSeconds`, with a notice naming the cell) and resets.

use napi_derive::napi;

use crate::error::KernelError;
use crate::eval::executor::Cell;
use crate::session::config::clamp_timeout;

#[napi(object)]
pub struct EvalCell {
    pub code: String,
    /// Named in the failure notice ("cell 2 of 3 (title) failed").
    pub title: Option<String>,
    /// This cell's timeout in seconds, in place of the request's: clamped to 1..3600
    /// with a notice, 0 = none.
    pub timeout: Option<f64>,
    /// A fresh kernel before this cell (`KernelPool.execute` only).
    pub reset: Option<bool>,
}

/// The cells, and the notices their timeouts' clamping gave.
pub(super) fn read_cells(cells: Vec<EvalCell>) -> Result<(Vec<Cell>, Vec<String>), KernelError> {
    let several = cells.len() > 1;
    let mut notices = Vec::new();
    let cells = cells
        .into_iter()
        .enumerate()
        .map(|(index, cell)| {
            let timeout = match cell.timeout {
                None => None,
                Some(seconds) if seconds < 0.0 || seconds.is_nan() => {
                    return Err(KernelError::InvalidArgument {
                        name: "cells[].timeout",
                        reason: format!(
                            "cell {}: must be 0 (no timeout) or a positive number of seconds (clamped to 1..3600 with a notice), got {seconds}",
                            index + 1
                        ),
                    })
                }
                Some(seconds) => {
                    let (timeout, notice) = clamp_timeout(Some(seconds))?;
                    notices.extend(notice.map(|n| match several {
                        true => format!("cell {}: {n}", index + 1),
                        false => n,
                    }));
                    Some(timeout)
                }
            };
            Ok(Cell {
                code: cell.code,
                title: cell.title,
                timeout,
                reset: cell.reset.unwrap_or(false),
            })
        })
        .collect::<Result<Vec<_>, _>>()?;
    Ok((cells, notices))
}
