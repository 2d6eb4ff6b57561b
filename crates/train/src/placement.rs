//! Where a GRPO run's two GPU users go: the engine (rollouts) and the trainer (updates), on the
//! `[trainer] num_gpus` GPUs the run is given.

use std::path::{Path, PathBuf};

use ta_python::{AdapterError, EngineOptions};

use crate::TrainConfig;

/// The engine's share of GPU memory when it shares the one GPU with the trainer (unless
/// `--gpu-memory-utilization` says otherwise): the trainer needs the rest for its activations.
const SHARED_ENGINE_MEMORY: f32 = 0.3;

/// An `--init-adapter` whose config cannot be read: the engine could not size its LoRA slots.
#[derive(Debug, thiserror::Error)]
#[error("--init-adapter {dir} is not a PEFT adapter directory: {source}")]
pub struct InitAdapterError {
    pub dir: PathBuf,
    pub source: AdapterError,
}

/// One GPU: engine and trainer share it. Several: the engine gets the first to itself and the
/// trainer the others (DDP), so generation never waits for an update's memory and vice versa.
#[derive(Debug, Clone, PartialEq)]
pub struct Placement {
    /// Environment of the engine process (`CUDA_VISIBLE_DEVICES`).
    pub engine_env: Vec<(String, String)>,
    /// Environment of the trainer process (`CUDA_VISIBLE_DEVICES`).
    pub trainer_env: Vec<(String, String)>,
    /// `cfg` as the trainer runs it: its `devices` (and `strategy`) follow from the GPUs it gets.
    pub trainer_cfg: TrainConfig,
}

impl Placement {
    /// The placement of the run `cfg` on `cfg.trainer.num_gpus` GPUs.
    pub fn of(cfg: &TrainConfig) -> Placement {
        let gpus = cfg.trainer.num_gpus;
        let mut trainer_cfg = cfg.clone();
        if gpus <= 1 {
            return Placement { engine_env: Vec::new(), trainer_env: Vec::new(), trainer_cfg };
        }
        let rest: Vec<String> = (1..gpus).map(|g| g.to_string()).collect();
        trainer_cfg.trainer.devices = (gpus - 1).into();
        // Lightning's `auto` picks DDP itself only sometimes; several trainer GPUs need it.
        if trainer_cfg.trainer.strategy == "auto" && gpus > 2 {
            trainer_cfg.trainer.strategy = "ddp".into();
        }
        Placement { engine_env: vec![("CUDA_VISIBLE_DEVICES".into(), "0".into())], trainer_env: vec![("CUDA_VISIBLE_DEVICES".into(), rest.join(","))], trainer_cfg }
    }

    /// `opts` (the engine flags) made fit for the run: its GPU, its memory share when shared,
    /// and LoRA slots for two adapters (the next is loaded before the previous is unloaded) as
    /// wide as the wider of `[lora] r` and an `--init-adapter` (an SFT run's, rank 32 by default).
    pub fn engine_options(&self, cfg: &TrainConfig, mut opts: EngineOptions) -> Result<EngineOptions, InitAdapterError> {
        opts.env = self.engine_env.clone();
        let init_rank = match cfg.init_adapter.as_deref() {
            Some(dir) => {
                let config = ta_python::adapter_config(Path::new(dir)).map_err(|source| InitAdapterError { dir: dir.into(), source })?;
                ta_python::adapter_rank(&config).unwrap_or(0)
            }
            None => 0,
        };
        opts.max_lora_rank = Some(cfg.lora.r.max(init_rank));
        opts.max_loras = Some(2);
        if self.engine_env.is_empty() && opts.gpu_memory_utilization.is_none() {
            opts.gpu_memory_utilization = Some(SHARED_ENGINE_MEMORY);
        }
        Ok(opts)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run_on(gpus: u32) -> TrainConfig {
        let mut cfg = TrainConfig::default();
        cfg.trainer.num_gpus = gpus;
        cfg
    }

    fn engine(cfg: &TrainConfig) -> EngineOptions {
        Placement::of(cfg).engine_options(cfg, EngineOptions::new("m", "base", PathBuf::from("engine.log"))).unwrap()
    }

    #[test]
    fn one_gpu_is_shared_and_the_engine_keeps_to_a_third() {
        let cfg = run_on(1);
        let p = Placement::of(&cfg);
        assert!(p.engine_env.is_empty() && p.trainer_env.is_empty());
        assert_eq!(p.trainer_cfg, cfg);
        let opts = engine(&cfg);
        assert_eq!((opts.gpu_memory_utilization, opts.max_loras, opts.max_lora_rank), (Some(0.3), Some(2), Some(cfg.lora.r)));
        let mut told = EngineOptions::new("m", "base", PathBuf::from("engine.log"));
        told.gpu_memory_utilization = Some(0.5);
        assert_eq!(p.engine_options(&cfg, told).unwrap().gpu_memory_utilization, Some(0.5), "the flag wins");
    }

    #[test]
    fn several_gpus_give_the_engine_the_first_and_the_trainer_the_rest() {
        let two = Placement::of(&run_on(2));
        assert_eq!(two.engine_env, [("CUDA_VISIBLE_DEVICES".to_string(), "0".to_string())]);
        assert_eq!(two.trainer_env, [("CUDA_VISIBLE_DEVICES".to_string(), "1".to_string())]);
        assert_eq!((two.trainer_cfg.trainer.devices.clone(), two.trainer_cfg.trainer.strategy.as_str()), (1.into(), "auto"));
        assert_eq!(engine(&run_on(2)).gpu_memory_utilization, None, "the engine has its GPU to itself");

        let four = Placement::of(&run_on(4));
        assert_eq!(four.trainer_env, [("CUDA_VISIBLE_DEVICES".to_string(), "1,2,3".to_string())]);
        assert_eq!((four.trainer_cfg.trainer.devices.clone(), four.trainer_cfg.trainer.strategy.as_str()), (3.into(), "ddp"));
        let mut fsdp = run_on(4);
        fsdp.trainer.strategy = "fsdp".into();
        assert_eq!(Placement::of(&fsdp).trainer_cfg.trainer.strategy, "fsdp", "a chosen strategy is kept");
    }

    #[test]
    fn lora_slots_fit_a_wider_init_adapter() {
        let dir = tempfile::tempdir().unwrap();
        let mut cfg = run_on(1);
        cfg.init_adapter = Some(dir.path().display().to_string());
        let err = Placement::of(&cfg).engine_options(&cfg, EngineOptions::new("m", "base", PathBuf::from("l"))).unwrap_err();
        assert!(err.to_string().starts_with("--init-adapter"), "{err}");
        std::fs::write(dir.path().join("adapter_config.json"), r#"{"r": 64}"#).unwrap();
        assert_eq!(engine(&cfg).max_lora_rank, Some(64.max(cfg.lora.r)));
    }
}
