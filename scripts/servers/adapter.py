"""A LoRA adapter for SmolLM2-135M-Instruct with random weights, written by
servegate's scripts/servers.sh: what proves a server's adapter path (the
adapter is loaded, named, and changes the answers) without a model hub.

    python adapter.py CHECKPOINT OUT

PEFT's layout, as vLLM 0.32 and SGLang 0.5.23 read it: adapter_config.json
and adapter_model.safetensors with `lora_A`/`lora_B` weights of rank 8 on
every layer's q_proj and v_proj. Seeded: the same bytes on every run.
B is not zero (PEFT starts it at zero, which leaves the model as it was):
its random values move the base model's answers.
"""

import json
import os
import sys

import torch
from safetensors.torch import save_file

RANK = 8


def main() -> None:
    checkpoint, out = sys.argv[1], sys.argv[2]
    with open(os.path.join(checkpoint, "config.json")) as f:
        config = json.load(f)
    hidden = config["hidden_size"]
    kv = config["num_key_value_heads"] * config["head_dim"]
    generator = torch.Generator().manual_seed(20261207)
    tensors = {}
    for layer in range(config["num_hidden_layers"]):
        for name, width in (("q_proj", hidden), ("v_proj", kv)):
            prefix = f"base_model.model.model.layers.{layer}.self_attn.{name}"
            a = torch.randn(RANK, hidden, generator=generator) * 0.05
            b = torch.randn(width, RANK, generator=generator) * 0.2
            tensors[f"{prefix}.lora_A.weight"] = a.to(torch.bfloat16).contiguous()
            tensors[f"{prefix}.lora_B.weight"] = b.to(torch.bfloat16).contiguous()
    os.makedirs(out, exist_ok=True)
    save_file(tensors, os.path.join(out, "adapter_model.safetensors"))
    adapter_config = {
        "base_model_name_or_path": "SmolLM2-135M-Instruct",
        "peft_type": "LORA",
        "task_type": "CAUSAL_LM",
        "r": RANK,
        "lora_alpha": 16,
        "lora_dropout": 0.0,
        "bias": "none",
        "fan_in_fan_out": False,
        "target_modules": ["q_proj", "v_proj"],
        "modules_to_save": None,
        "inference_mode": True,
    }
    with open(os.path.join(out, "adapter_config.json"), "w") as f:
        json.dump(adapter_config, f, indent=2, sort_keys=True)
        f.write("\n")


if __name__ == "__main__":
    main()
