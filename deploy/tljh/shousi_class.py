# The class of `make class-up` on The Littlest JupyterHub (TLJH). NOT TESTED HERE (docs/INSTRUCTOR.md §6).
#
# TLJH makes one Unix account per hub user, named jupyter-<name>, and starts servers with SystemdSpawner
# from the shared environment /opt/tljh/user. Set up once, as root, on the TLJH machine:
#
#   /opt/tljh/user/bin/pip install -r requirements.txt          # the course's pinned packages, nbgrader included
#   groupadd course-staff && usermod -aG course-staff jupyter-instructor && usermod -aG course-staff jupyter-ta
#   (after each of them logged in once, so that TLJH made the accounts)
#   the course, the exchange and the role settings exactly as tools/class_up.py makes them (course(),
#   exchange(), settings()), with BASE=/srv/shousi-class; homes: chmod 700 /home/jupyter-*
#   cp deploy/tljh/shousi_class.py /opt/tljh/config/jupyterhub_config.d/ && tljh-config reload hub
#
# nbgrader's student id is the Unix name: the roster holds jupyter-alice, not alice (`nbgrader db student
# add jupyter-alice`), and the class's collect compares a hand-in's owner with that name.
import grp

c = get_config()  # noqa: F821  (injected by JupyterHub)
BASE = "/srv/shousi-class"


def per_role(spawner):
    """As deploy/class/jupyterhub_config.py: the staff open the course with Formgrader, students their home."""
    staff = f"jupyter-{spawner.user.name}" in grp.getgrnam("course-staff").gr_mem
    role = "staff" if staff else "student"
    spawner.notebook_dir = f"{BASE}/course" if staff else "~"
    spawner.environment.update({
        "JUPYTER_CONFIG_PATH": f"{BASE}/etc/{role}",
        "PYTHONPATH": f"{BASE}/course" if staff else f"{BASE}/lib",
        "OMP_NUM_THREADS": "1",
    })


c.Spawner.pre_spawn_hook = per_role
c.SystemdSpawner.unit_extra_properties = {"UMask": "0007"}  # the staff share through the group, nobody else
