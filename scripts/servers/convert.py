"""SmolLM2-135M-Instruct's Q4_1 GGUF as a Hugging Face bf16 checkpoint, for
SGLang and vLLM (which do not load this GGUF on CPU): transformers' GGUF
loader dequantizes the weights as it loads them (GgufConfig(dequantize=True);
save_pretrained refuses a model that is still quantized), and the checkpoint
is saved as safetensors with the tokenizer and chat template the GGUF
carries. Run by scripts/servers.sh install, which checks the bytes written:
the same on every run.

    python convert.py FILE.gguf OUT_DIR
"""

import os
import sys

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer, GgufConfig


def main() -> None:
    gguf, out = sys.argv[1], sys.argv[2]
    folder, name = os.path.dirname(os.path.abspath(gguf)), os.path.basename(gguf)
    tokenizer = AutoTokenizer.from_pretrained(folder, gguf_file=name)
    model = AutoModelForCausalLM.from_pretrained(
        folder,
        gguf_file=name,
        dtype=torch.bfloat16,
        quantization_config=GgufConfig(dequantize=True),
    )
    model.save_pretrained(out, safe_serialization=True)
    tokenizer.save_pretrained(out)


if __name__ == "__main__":
    main()
