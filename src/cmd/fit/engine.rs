//! The one engine `fit` starts for the stages that play the base model and adapters (`train`,
//! then the check set's `eval`): one start-up instead of one per stage, and on a GPU it starts
//! beside collect and SFT, which need none. It is started with the options `train` would start
//! its own with ([`crate::cmd::train::engine_options`]), so a stage run alone, as `fit` prints
//! it, plays as it played here.

use std::future::Future;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use ta_python::{EngineOptions, EngineSource, PythonEnv, ServedEngine};

/// Starts the engine; returns it with how long it took to be ready.
pub async fn start(python: PythonEnv, options: EngineOptions) -> Result<(ServedEngine, Duration)> {
    let t0 = Instant::now();
    let engine = EngineSource::Start { python, options: Box::new(options) }.open().await.context("the engine for train and eval did not start")?;
    Ok((engine, t0.elapsed()))
}

/// Runs `work` while `engine` starts. Returns what `work` returned and the engine when it came
/// up. An engine that failed beside `work` is reported and `None`; the caller starts it again
/// when it is needed, so a start that failed for want of memory during SFT does not cost the
/// SFT. `work` failing (or returning early) drops an engine still starting, which stops it, and so
/// does a Ctrl-C while the engine is waited for after `work` (the caller then stops the run).
pub async fn beside<T>(
    work: impl Future<Output = Result<T>>,
    engine: impl Future<Output = Result<(ServedEngine, Duration)>>,
) -> Result<(T, Option<(ServedEngine, Duration)>)> {
    let (mut work, mut engine) = (std::pin::pin!(work), std::pin::pin!(engine));
    let mut ready: Option<Option<(ServedEngine, Duration)>> = None;
    let done = loop {
        tokio::select! {
            done = &mut work => break done?,
            started = &mut engine, if ready.is_none() => {
                ready = Some(started.map_err(|e| eprintln!("warning: {e:#}\n      it will be started again after SFT")).ok());
            }
        }
    };
    let engine = match ready {
        Some(engine) => engine,
        None => tokio::select! {
            biased;
            () = crate::interrupted::ctrl_c() => None,
            started = engine => started.map_err(|e| eprintln!("warning: {e:#}\n      it will be started again")).ok(),
        },
    };
    Ok((done, engine))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn running() -> (ServedEngine, Duration) {
        (ServedEngine { client: ta_python::EngineClient::new("http://127.0.0.1:9"), base_name: "base".into(), process: None }, Duration::from_secs(1))
    }

    #[tokio::test]
    async fn the_engine_comes_up_beside_the_work_whichever_ends_first() {
        let slow = |ms| tokio::time::sleep(Duration::from_millis(ms));
        let (n, engine) = beside(async { Ok(7) }, async {
            slow(50).await;
            Ok(running())
        })
        .await
        .unwrap();
        assert_eq!(n, 7);
        assert!(engine.is_some(), "an engine slower than the work is waited for");
        let (n, engine) = beside(
            async {
                slow(50).await;
                Ok(8)
            },
            async { Ok(running()) },
        )
        .await
        .unwrap();
        assert_eq!((n, engine.is_some()), (8, true));
    }

    #[tokio::test]
    async fn a_failed_engine_leaves_the_work_alone_and_failed_work_stops_the_engine() {
        let (n, engine) = beside(
            async {
                tokio::time::sleep(Duration::from_millis(20)).await;
                Ok(3)
            },
            async { Err(anyhow::anyhow!("out of memory")) },
        )
        .await
        .unwrap();
        assert_eq!((n, engine.is_none()), (3, true), "the work finished; the engine is started again later");
        let never = async {
            std::future::pending::<()>().await;
            Ok(running())
        };
        let failed: Result<(u8, _)> = beside(async { Err(anyhow::anyhow!("sft failed")) }, never).await;
        assert!(matches!(failed, Err(e) if e.to_string() == "sft failed"), "failed work does not wait for the engine");
    }
}
