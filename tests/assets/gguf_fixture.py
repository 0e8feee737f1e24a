"""What the tiny random-weight model scripts share: a GGUF file written atomically,
with the tokenizer (and chat template) of another GGUF, from the command line."""

import sys
from pathlib import Path

import gguf
import numpy as np


def write(out: Path, tokenizer: Path, arch: str, name: str, keys, tensors, seed: int = 0,
          chat_template: "str | None" = None) -> Path:
    """Write `out` (atomically): keys(writer) adds the model's keys, tensors(rng, n_vocab)
    yields (name, array) drawn from a generator seeded with `seed`; returns `out`.
    `chat_template`: the model's, instead of the tokenizer file's."""
    source = gguf.GGUFReader(tokenizer)
    n_vocab = len(source.fields["tokenizer.ggml.tokens"].data)
    tmp = out.with_suffix(".tmp")
    w = gguf.GGUFWriter(tmp, arch)
    w.add_name(name)
    w.add_vocab_size(n_vocab)
    keys(w)
    _copy_tokenizer(source, w, skip={"tokenizer.chat_template"} if chat_template else set())
    if chat_template:
        w.add_chat_template(chat_template)
    for tensor, array in tensors(np.random.default_rng(seed), n_vocab):
        w.add_tensor(tensor, array)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    tmp.replace(out)
    return out


def weights(rng):
    """weight(*shape, dtype): random values scaled by the input size (numpy shapes are
    reversed GGUF shapes), so activations stay of order one through the layers."""
    def weight(*shape, dtype=np.float32):
        return (rng.standard_normal(shape) / np.sqrt(shape[-1])).astype(dtype)
    return weight


def main(write_model) -> None:
    """`script OUT.gguf [TOKENIZER.gguf]`: the default model's tokenizer unless given."""
    if len(sys.argv) > 2:
        source = Path(sys.argv[2])
    else:
        sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
        from engine.llama.model_path import resolve_model_path
        source = resolve_model_path()
    write_model(Path(sys.argv[1]), source)


def _copy_tokenizer(source: gguf.GGUFReader, w: gguf.GGUFWriter, skip: set) -> None:
    for key, field in source.fields.items():
        if not key.startswith("tokenizer.") or key in skip:
            continue
        kind = field.types[0]
        if kind == gguf.GGUFValueType.ARRAY:
            w.add_key_value(key, field.contents(), kind, sub_type=field.types[-1])
        else:
            w.add_key_value(key, field.contents(), kind)
