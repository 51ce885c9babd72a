"""A tiny llama-architecture GGUF model for bench/bench_llama_cpp.py: random weights, a real
SentencePiece-style vocabulary (llama.cpp's "llama" tokenizer: pieces with scores, "▁" for a
space, a space prefix, BOS, byte fallback), so llama.cpp tokenizes, evaluates and returns
log-probabilities like any model, in about a second on a CPU and a few MB on disk.

Run with the llama.cpp venv's Python (it needs `gguf` and numpy, never Django):

    .venv-llama/bin/python bench/llama_cpp_model.py OUT.gguf [--seed 7]

The vocabulary: the control tokens, the 256 byte tokens, every printable ASCII character alone
and after "▁", and each word of WORDS with every prefix of "▁word" (SentencePiece merges
adjacent pieces by score, so a word forms only if its prefixes are pieces too). A word not
listed is spelled in smaller pieces: options of one and of several tokens both occur.
"""

import argparse
import string
from pathlib import Path

import gguf
import numpy as np

TEXT = (
    "The quick brown fox jumps over the lazy dog Q A Answer Which planet is red hot cold "
    "Mars Venus Earth Moon Sun star big small a an of in on to and or not yes no colour "
    "color sky blue green sea water fire ice cat dog bird fish What animal barks meows flies "
    "swims number one two three four five largest smallest city capital France Paris Rome "
    "Berlin Madrid"
)
WORDS = TEXT.split()
N_EMBD, N_HEAD, N_LAYER, N_FF, N_CTX = 64, 4, 2, 128, 512


def vocabulary() -> tuple[list[str], list[float], list[int]]:
    """(pieces, scores, token types) in id order: <unk> 0, <s> 1, </s> 2, bytes, pieces."""
    pieces = ["<unk>", "<s>", "</s>"]
    types = [gguf.TokenType.UNKNOWN, gguf.TokenType.CONTROL, gguf.TokenType.CONTROL]
    scores = [0.0, 0.0, 0.0]
    for byte in range(256):
        pieces.append(f"<0x{byte:02X}>")
        types.append(gguf.TokenType.BYTE)
        scores.append(0.0)
    seen = set(pieces)

    def add(piece: str) -> None:
        if piece not in seen:
            seen.add(piece)
            pieces.append(piece)
            types.append(gguf.TokenType.NORMAL)
            # Longer pieces merge first, as SentencePiece's scores make them.
            scores.append(float(len(piece)) - len(pieces) * 1e-4)

    add("▁")
    for char in string.ascii_letters + string.digits + string.punctuation:
        add(char)
        add("▁" + char)
    for word in WORDS:
        spelled = "▁" + word
        for end in range(2, len(spelled) + 1):
            add(spelled[:end])
    return pieces, scores, [int(t) for t in types]


def write_model(path: Path, seed: int = 7) -> Path:
    pieces, scores, types = vocabulary()
    rng = np.random.default_rng(seed)

    def weights(*shape: int, scale: float) -> np.ndarray:
        return (rng.standard_normal(shape) * scale).astype(np.float32)

    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_name("evalsite-tiny-llama")
    writer.add_context_length(N_CTX)
    writer.add_embedding_length(N_EMBD)
    writer.add_block_count(N_LAYER)
    writer.add_feed_forward_length(N_FF)
    writer.add_head_count(N_HEAD)
    writer.add_head_count_kv(N_HEAD)
    writer.add_rope_dimension_count(N_EMBD // N_HEAD)
    writer.add_layer_norm_rms_eps(1e-5)
    writer.add_file_type(gguf.LlamaFileType.ALL_F32)
    writer.add_tokenizer_model("llama")
    writer.add_token_list(pieces)
    writer.add_token_scores(scores)
    writer.add_token_types(types)
    writer.add_unk_token_id(0)
    writer.add_bos_token_id(1)
    writer.add_eos_token_id(2)
    writer.add_add_bos_token(True)
    writer.add_add_eos_token(False)
    writer.add_add_space_prefix(True)

    vocab = len(pieces)
    # numpy shapes are GGUF's dimensions reversed: (rows = outputs, columns = inputs).
    writer.add_tensor("token_embd.weight", weights(vocab, N_EMBD, scale=1.0))
    for layer in range(N_LAYER):
        block = f"blk.{layer}"
        writer.add_tensor(f"{block}.attn_norm.weight", np.ones(N_EMBD, dtype=np.float32))
        for name in ("attn_q", "attn_k", "attn_v", "attn_output"):
            writer.add_tensor(f"{block}.{name}.weight", weights(N_EMBD, N_EMBD, scale=0.2))
        writer.add_tensor(f"{block}.ffn_norm.weight", np.ones(N_EMBD, dtype=np.float32))
        writer.add_tensor(f"{block}.ffn_gate.weight", weights(N_FF, N_EMBD, scale=0.2))
        writer.add_tensor(f"{block}.ffn_up.weight", weights(N_FF, N_EMBD, scale=0.2))
        writer.add_tensor(f"{block}.ffn_down.weight", weights(N_EMBD, N_FF, scale=0.2))
    writer.add_tensor("output_norm.weight", np.ones(N_EMBD, dtype=np.float32))
    writer.add_tensor("output.weight", weights(vocab, N_EMBD, scale=0.5))

    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    write_model(args.out, args.seed)
    print(
        f"wrote {args.out} ({args.out.stat().st_size / 1e6:.1f} MB, {len(vocabulary()[0])} tokens)"
    )


if __name__ == "__main__":
    main()
