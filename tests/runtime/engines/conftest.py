"""Fixtures shared by the engines' tests."""
import pytest

from generators.runtime import convert, load_checkpoint
from generators.runtime.engines import cloop
from generators.runtime.model.synthetic import TINY, write_checkpoint


@pytest.fixture(scope="module")
def c_models(request, tmp_path_factory):
    """The tiny checkpoint (seed: the module's MODEL_SEED) in every weight format for the
    module's EngineConfig ENG, for tests of the C loop (which must be built)."""
    if not cloop.available():
        pytest.fail("the C loop is not available (make setup builds the library)")
    eng = request.module.ENG
    ck = load_checkpoint(write_checkpoint(tmp_path_factory.mktemp("tiny"), TINY,
                                          seed=request.module.MODEL_SEED), eng)
    return {f: convert(ck, f, eng, notice=None) for f in ("int8", "ternary", "q4")}
