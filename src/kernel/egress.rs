//! What a cell hears of its kernel's proxy (`sandbox.network = { allow }`): the hosts it
//! refused while the cell ran, each once, as `status` events `{op: 'sandbox', data:
//! {denied: 'connect', host}}`. The proxy refuses on its own tasks; the running cell
//! takes the refusals, so each is told where the request that caused it was made.

use std::collections::HashSet;

use serde_json::{Map, Value};
use tokio::sync::mpsc::UnboundedReceiver;
use tokio::sync::MutexGuard;

use crate::sandbox::egress_proxy::Denied;
use crate::wire::events::StatusEvent;

/// At most this many hosts are told per cell: a cell probing a thousand hosts gets
/// refusals, not a thousand events.
const MAX_PER_CELL: usize = 20;

/// The refusals of one cell.
pub(super) struct CellRefusals<'a> {
    denials: Option<MutexGuard<'a, UnboundedReceiver<Denied>>>,
    told: HashSet<String>,
}

impl<'a> CellRefusals<'a> {
    /// Takes the kernel's refusals for a cell, dropping those made between cells (by
    /// what an earlier cell left running: they belong to no cell).
    pub(super) async fn open(
        denials: Option<&'a tokio::sync::Mutex<UnboundedReceiver<Denied>>>,
    ) -> CellRefusals<'a> {
        let mut denials = match denials {
            Some(denials) => Some(denials.lock().await),
            None => None,
        };
        if let Some(denials) = denials.as_mut() {
            while denials.try_recv().is_ok() {}
        }
        CellRefusals {
            denials,
            told: HashSet::new(),
        }
    }

    /// The next refusal; never resolves without a proxy. Cancel safety: a refusal is
    /// taken only when it resolves.
    pub(super) async fn next(&mut self) -> Option<Denied> {
        match self.denials.as_mut() {
            Some(denials) => denials.recv().await,
            None => std::future::pending().await,
        }
    }

    /// What to tell of `denied`: a status event the first time its host is refused in
    /// this cell, while the cell has told fewer than [`MAX_PER_CELL`].
    pub(super) fn status(&mut self, denied: Denied) -> Option<StatusEvent> {
        let host = format!("{}:{}", denied.host, denied.port);
        if self.told.len() >= MAX_PER_CELL || !self.told.insert(host.clone()) {
            return None;
        }
        let mut data = Map::new();
        data.insert("denied".into(), Value::String("connect".into()));
        data.insert("host".into(), Value::String(host));
        Some(StatusEvent {
            op: "sandbox".into(),
            data,
        })
    }

    /// Those that arrived meanwhile, once the cell is done.
    pub(super) fn rest(&mut self) -> Vec<StatusEvent> {
        let mut pending = Vec::new();
        if let Some(denials) = self.denials.as_mut() {
            while let Ok(denied) = denials.try_recv() {
                pending.push(denied);
            }
        }
        pending.into_iter().filter_map(|d| self.status(d)).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sandbox::egress_proxy::DeniedWhy;

    fn denied(host: &str, port: u16) -> Denied {
        Denied {
            host: host.into(),
            port,
            why: DeniedWhy::NotListed,
        }
    }

    #[tokio::test]
    async fn each_host_is_told_once_and_those_made_between_cells_are_dropped() {
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
        let denials = tokio::sync::Mutex::new(rx);
        tx.send(denied("stale.example", 443)).unwrap();
        let mut cell = CellRefusals::open(Some(&denials)).await;
        tx.send(denied("example.com", 443)).unwrap();
        tx.send(denied("example.com", 443)).unwrap();
        tx.send(denied("example.com", 80)).unwrap();
        let first = cell.next().await.unwrap();
        let told = cell.status(first).unwrap();
        assert_eq!(told.op, "sandbox");
        assert_eq!(told.data["denied"], "connect");
        assert_eq!(told.data["host"], "example.com:443");
        let rest: Vec<String> = cell
            .rest()
            .into_iter()
            .map(|s| s.data["host"].as_str().unwrap().to_string())
            .collect();
        assert_eq!(rest, ["example.com:80"]);
        for port in 0..100 {
            tx.send(denied("many.example", port)).unwrap();
        }
        assert_eq!(cell.rest().len(), MAX_PER_CELL - 2);
    }
}
