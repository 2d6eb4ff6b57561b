//! The warm pool: stdio servers started ahead of the episodes that will use them, each on its own
//! fresh copy of the state, so that an isolated episode rarely waits for a server to start.
//!
//! At most `size` servers wait ready at once (a semaphore permit travels with each one); `size`
//! filler tasks replace them as episodes take them. [`Pool::shutdown`] stops the fillers and
//! every server still waiting; dropping the pool does the same without waiting (rmcp kills a
//! dropped server's process group), so a panic or Ctrl-C leaves no orphan processes.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use tokio::sync::{Mutex, OwnedSemaphorePermit, Semaphore, mpsc};

use super::{IsolationError, Template};

/// A started server and the state it runs on.
pub struct Slot {
    pub client: ta_mcp::McpClient,
    pub workdir: Arc<super::Workdir>,
    pub episode_id: String,
    /// How long the copy and the start took.
    pub prepared_in: Duration,
    _permit: Option<OwnedSemaphorePermit>,
}

/// Starts one server on a fresh copy of the state (the pool's unit of work, also used directly
/// when there is no pool).
pub async fn prepare(template: &Template, episode_id: String) -> Result<Slot, IsolationError> {
    let t0 = Instant::now();
    let state = template.state.clone();
    let label = episode_id.clone();
    let workdir = tokio::task::spawn_blocking(move || super::Workdir::create(state.as_deref(), &label))
        .await
        .expect("copying the state does not panic")
        .map_err(IsolationError::State)?;
    let client = template.start(&workdir, &episode_id).await?;
    Ok(Slot { client, workdir: Arc::new(workdir), episode_id, prepared_in: t0.elapsed(), _permit: None })
}

pub struct Pool {
    ready: Mutex<mpsc::Receiver<Result<Slot, IsolationError>>>,
    fillers: std::sync::Mutex<Vec<tokio::task::JoinHandle<()>>>,
}

impl Pool {
    /// Starts `size` (at least 1) fillers that keep up to `size` servers ready.
    pub fn start(template: Arc<Template>, size: usize, counter: Arc<AtomicU64>) -> Pool {
        let size = size.max(1);
        let permits = Arc::new(Semaphore::new(size));
        let (tx, rx) = mpsc::channel(size);
        let fillers = (0..size)
            .map(|_| {
                let (template, permits, tx, counter) = (template.clone(), permits.clone(), tx.clone(), counter.clone());
                tokio::spawn(async move {
                    loop {
                        let Ok(permit) = permits.clone().acquire_owned().await else { return };
                        let id = format!("e{:06}", counter.fetch_add(1, Ordering::Relaxed));
                        let slot = prepare(&template, id).await.map(|mut s| {
                            s._permit = Some(permit);
                            s
                        });
                        if tx.send(slot).await.is_err() {
                            return;
                        }
                    }
                })
            })
            .collect();
        Pool { ready: Mutex::new(rx), fillers: std::sync::Mutex::new(fillers) }
    }

    /// The next ready server (waiting for one when none is). A server that failed to start is
    /// reported here, to the episode that would have used it.
    pub async fn take(&self) -> Result<Slot, IsolationError> {
        self.ready.lock().await.recv().await.unwrap_or(Err(IsolationError::Closed))
    }

    /// Stops the fillers and every waiting server, and waits until they are gone.
    pub async fn shutdown(&self) {
        let fillers = std::mem::take(&mut *self.fillers.lock().expect("fillers lock"));
        for f in &fillers {
            f.abort();
        }
        // An aborted filler drops the server it was starting, which kills it.
        for f in fillers {
            let _ = f.await;
        }
        let mut rx = self.ready.lock().await;
        rx.close();
        while let Some(slot) = rx.recv().await {
            if let Ok(slot) = slot {
                slot.client.close().await;
            }
        }
    }
}

impl Drop for Pool {
    fn drop(&mut self) {
        for f in self.fillers.get_mut().expect("fillers lock").iter() {
            f.abort();
        }
    }
}
