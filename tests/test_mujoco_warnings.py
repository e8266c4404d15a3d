"""Making a MuJoCo env prints none of MuJoCo's known deprecation warning; others still show."""
import pytest

from batchrl.envs import make_gym, mujoco_warnings

mujoco = pytest.importorskip("mujoco")  # the batchrl[mujoco] extra

KNOWN = ("compiler attribute 'settotalmass' is deprecated and will be removed in a future "
         "release: scale the masses and densities in the model, or call mj_setTotalmass and "
         "mj_setConst on the compiled model")


@pytest.fixture
def recorded():
  """A handler of the user's own, installed before: what reaches it is recorded."""
  seen = []
  mujoco.set_mju_user_warning(seen.append)
  yield seen
  mujoco.set_mju_user_warning(None)


def test_making_half_cheetah_prints_no_settotalmass_warning(capfd, tmp_path, monkeypatch):
  monkeypatch.chdir(tmp_path)  # where MuJoCo's default handler would write MUJOCO_LOG.TXT
  make_gym("HalfCheetah-v5").close()
  out, err = capfd.readouterr()
  assert "settotalmass" not in out + err
  assert not (tmp_path / "MUJOCO_LOG.TXT").exists()
  assert mujoco.get_mju_user_warning() is None  # MuJoCo's own handler again afterwards


def test_only_the_known_message_is_dropped_and_the_users_handler_comes_back(recorded, capfd):
  assert mujoco_warnings.is_known(KNOWN)
  assert not mujoco_warnings.is_known("compiler attribute 'other' is deprecated")
  with mujoco_warnings.known_warnings_dropped("HalfCheetah-v5"):
    handler = mujoco.get_mju_user_warning()
    handler(KNOWN)  # as MuJoCo calls it while the model compiles
    handler("Nan, Inf or huge value in QACC at DOF 0. The simulation is unstable.")
  assert recorded == ["Nan, Inf or huge value in QACC at DOF 0. The simulation is unstable."]
  assert mujoco.get_mju_user_warning() == recorded.append
  make_gym("HalfCheetah-v5").close()  # the real model: its warning does not reach the user
  assert recorded == ["Nan, Inf or huge value in QACC at DOF 0. The simulation is unstable."]
  assert "settotalmass" not in "".join(capfd.readouterr())


def test_without_a_users_handler_other_warnings_print_as_mujoco_does(capfd):
  with mujoco_warnings.known_warnings_dropped("Hopper-v5"):
    with mujoco_warnings.known_warnings_dropped("Hopper-v5"):  # nested: one handler
      mujoco.get_mju_user_warning()(KNOWN)
    mujoco.get_mju_user_warning()("something else")
  assert capfd.readouterr().err == "WARNING: something else\n\n"
  assert mujoco.get_mju_user_warning() is None


def test_envs_without_mujoco_leave_its_handler_alone(recorded, monkeypatch):
  monkeypatch.delitem(__import__("sys").modules, "mujoco")
  with mujoco_warnings.known_warnings_dropped("CartPole-v1"):
    assert mujoco.get_mju_user_warning() == recorded.append
