# JupyterHub for a class on one machine, started by `make class-up` (tools/class_up.py), which sets
# CLASS_BASE (the class's folder) and CLASS_PORT in the hub's environment. Tested here.
#
# Accounts are the machine's own (PAM, JupyterHub's default authenticator); each user's server runs
# as that user (LocalProcessSpawner). The course staff (group course-staff) open the course folder
# with Formgrader; students open their private home with the Assignment List. Which nbgrader
# extensions each role sees, and where its exchange is, comes from a folder of Jupyter settings per
# role (CLASS_BASE/etc/staff, CLASS_BASE/etc/student), put first on JUPYTER_CONFIG_PATH.
import grp
import os

c = get_config()  # noqa: F821  (injected by JupyterHub)
BASE = os.environ["CLASS_BASE"]
PORT = int(os.environ["CLASS_PORT"])
STAFF = set(grp.getgrnam("course-staff").gr_mem)

c.JupyterHub.bind_url = f"http://127.0.0.1:{PORT}"
c.JupyterHub.hub_bind_url = f"http://127.0.0.1:{PORT + 1}"
c.ConfigurableHTTPProxy.api_url = f"http://127.0.0.1:{PORT + 2}"
c.ConfigurableHTTPProxy.command = [f"{BASE}/proxy/node_modules/.bin/configurable-http-proxy"]
c.JupyterHub.db_url = f"sqlite:///{BASE}/hub/jupyterhub.sqlite"
c.JupyterHub.cookie_secret_file = f"{BASE}/hub/cookie_secret"
c.JupyterHub.pid_file = f"{BASE}/hub/jupyterhub.pid"

c.Authenticator.allowed_users = STAFF | {"alice", "bob", "carol"}
c.PAMAuthenticator.open_sessions = False  # no login session per server: nothing to clean up at logout

# umask 007: what a user's server writes is never readable by others (the staff share through the
# group); the course's folders are set-group-id, so the staff's files stay in course-staff.
c.Spawner.cmd = ["sh", "-c", 'umask 007 && exec "$@"', "sh", f"{BASE}/venv/bin/jupyterhub-singleuser"]
c.Spawner.default_url = "/lab"
c.Spawner.http_timeout = 120  # a 2-core machine starting several servers at once
c.Spawner.start_timeout = 180


def per_role(spawner):
    """Staff: the course folder, Formgrader, the course's packages (grader, solutions) importable.
    Students: their home, the Assignment List, only the packages a release notebook imports."""
    staff = spawner.user.name in STAFF
    role = "staff" if staff else "student"
    spawner.notebook_dir = f"{BASE}/course" if staff else "~"
    spawner.environment = {
        "JUPYTER_CONFIG_PATH": f"{BASE}/etc/{role}",
        "PYTHONPATH": f"{BASE}/course" if staff else f"{BASE}/lib",
        "PATH": f"{BASE}/venv/bin:/usr/bin:/bin",  # nbgrader runs `alembic` from PATH
        "OMP_NUM_THREADS": "1",
    }


c.Spawner.pre_spawn_hook = per_role
