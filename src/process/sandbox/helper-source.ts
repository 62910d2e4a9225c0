/** C source of sessiond's sandbox helper (pid 1 of a bubblewrap sandbox, and the Landlock launcher); built once per host by helper-binary.ts. */
export const HELPER_SOURCE = String.raw`
/*
 * sessiond's sandbox helper. Two modes:
 *   init [--status-fd N] [--bridge PORT SOCKET]... -- CMD ARGS...
 *     pid 1 of a bubblewrap sandbox: listens on 127.0.0.1:PORT for each bridge and relays every
 *     connection to the Unix socket SOCKET (a child per connection: the init itself stays one
 *     process, no server process of its own); starts CMD; forwards SIGINT/SIGTERM/SIGHUP/SIGQUIT/SIGUSR1/
 *     SIGUSR2 to it; reaps every orphan; writes "exit N" or "signal N" to the status fd and exits
 *     when CMD exits (the kernel then kills what is left of the PID namespace).
 *   landlock [--ro PATH]... [--rw PATH]... [--dev PATH] [--proc-self] [--port N]... -- CMD ARGS...
 *     restricts itself with Landlock (ABI >= 4: writes only under --rw, reads only under --ro/--rw,
 *     TCP connect only to --port; ABI >= 6 also scopes signals and abstract Unix sockets), then execs CMD.
 *   landlock-abi: prints the kernel's Landlock ABI version (0: none).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#define MAX_BRIDGES 16

static volatile pid_t agent = 0;

static void die(const char *what, const char *arg) {
  fprintf(stderr, "sessiond-sandbox: %s%s%s: %s\n", what, arg ? " " : "", arg ? arg : "", strerror(errno));
  _exit(126);
}

static void forward(int sig) {
  if (agent > 0) kill(agent, sig);
}

static void relay(int a, int b) {
  char buf[65536];
  struct pollfd fds[2] = {{a, POLLIN, 0}, {b, POLLIN, 0}};
  int open_in[2] = {1, 1};
  while (open_in[0] || open_in[1]) {
    if (poll(fds, 2, -1) < 0) {
      if (errno == EINTR) continue;
      return;
    }
    for (int i = 0; i < 2; i++) {
      if (!open_in[i] || !(fds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      ssize_t n = read(fds[i].fd, buf, sizeof buf);
      int to = fds[1 - i].fd;
      if (n <= 0) {
        open_in[i] = 0;
        fds[i].fd = -1;
        shutdown(to, SHUT_WR);
        continue;
      }
      for (ssize_t off = 0; off < n;) {
        ssize_t w = write(to, buf + off, n - off);
        if (w < 0) {
          if (errno == EINTR) continue;
          return;
        }
        off += w;
      }
    }
  }
}

static const int forwarded[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2};
#define FORWARDED_COUNT (sizeof forwarded / sizeof forwarded[0])

/* Written to by the SIGCHLD handler: the init's loop polls it with the bridges' listeners. */
static int wake[2] = {-1, -1};

static void on_child(int sig) {
  (void)sig;
  int saved = errno;
  if (write(wake[1], "c", 1) < 0) { /* the pipe is full: a wake-up is pending anyway */ }
  errno = saved;
}

/* Accepts one connection on bridge listener fd and relays it to socket in a child of the init (reaped by its loop). */
static void accept_bridge(int listener, const char *socket_path, int count, const int *listeners) {
  int conn = accept4(listener, NULL, NULL, SOCK_CLOEXEC);
  if (conn < 0) return; /* gone before it was accepted (EAGAIN), or EINTR: poll says again if need be */
  pid_t child = fork();
  if (child == 0) {
    struct sigaction dfl = {.sa_handler = SIG_DFL};
    sigemptyset(&dfl.sa_mask);
    sigaction(SIGCHLD, &dfl, NULL);
    for (size_t s = 0; s < FORWARDED_COUNT; s++) sigaction(forwarded[s], &dfl, NULL);
    close(wake[0]);
    close(wake[1]);
    for (int b = 0; b < count; b++) close(listeners[b]);
    int up = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_un addr = {.sun_family = AF_UNIX};
    strncpy(addr.sun_path, socket_path, sizeof addr.sun_path - 1);
    if (up < 0 || connect(up, (struct sockaddr *)&addr, sizeof addr) < 0) _exit(1);
    relay(conn, up);
    _exit(0);
  }
  close(conn);
}

#ifndef SYS_close_range
#define SYS_close_range 436
#endif

/* Closes every fd from 3 up but keep: close_range (Linux 5.9) in at most two calls instead of a close() per fd. */
static void close_fds_but(int keep) {
  if (keep < 3) {
    if (syscall(SYS_close_range, 3U, ~0U, 0U) == 0) return;
  } else if ((keep == 3 || syscall(SYS_close_range, 3U, (unsigned)keep - 1, 0U) == 0) &&
             syscall(SYS_close_range, (unsigned)keep + 1, ~0U, 0U) == 0)
    return;
  for (int fd = 3; fd < 1024; fd++)
    if (fd != keep) close(fd);
}

static int run_init(int argc, char **argv) {
  int status_fd = -1, count = 0, ports[MAX_BRIDGES], listeners[MAX_BRIDGES];
  char *sockets[MAX_BRIDGES];
  int i = 2;
  for (; i < argc && strcmp(argv[i], "--") != 0; i++) {
    if (strcmp(argv[i], "--status-fd") == 0 && i + 1 < argc) status_fd = atoi(argv[++i]);
    else if (strcmp(argv[i], "--bridge") == 0 && i + 2 < argc && count < MAX_BRIDGES) {
      ports[count] = atoi(argv[++i]);
      sockets[count++] = argv[++i];
    } else {
      fprintf(stderr, "sessiond-sandbox: unknown init argument %s\n", argv[i]);
      return 126;
    }
  }
  if (i + 1 >= argc) {
    fprintf(stderr, "sessiond-sandbox: no command\n");
    return 126;
  }
  char **command = argv + i + 1;
  /* Nothing of bubblewrap's or the worker's reaches the agent but stdio (the status fd is close-on-exec). */
  close_fds_but(status_fd);
  if (status_fd >= 0) fcntl(status_fd, F_SETFD, FD_CLOEXEC);
  for (int b = 0; b < count; b++) {
    /* Non-blocking: a connection that poll saw may be gone by the time it is accepted. */
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    int one = 1;
    struct sockaddr_in addr = {.sin_family = AF_INET, .sin_port = htons(ports[b])};
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (fd < 0 || bind(fd, (struct sockaddr *)&addr, sizeof addr) < 0 || listen(fd, 128) < 0) die("cannot listen for bridge", sockets[b]);
    listeners[b] = fd;
  }
  if (pipe2(wake, O_CLOEXEC | O_NONBLOCK) < 0) die("pipe", NULL);
  sigset_t all, old;
  sigfillset(&all);
  sigprocmask(SIG_BLOCK, &all, &old);
  pid_t child = fork();
  if (child < 0) die("fork", NULL);
  if (child == 0) {
    sigprocmask(SIG_SETMASK, &old, NULL);
    execvp(command[0], command);
    fprintf(stderr, "sessiond-sandbox: cannot run %s: %s\n", command[0], strerror(errno));
    _exit(127);
  }
  agent = child;
  struct sigaction sa = {.sa_handler = forward};
  sigemptyset(&sa.sa_mask);
  for (size_t s = 0; s < FORWARDED_COUNT; s++) sigaction(forwarded[s], &sa, NULL);
  struct sigaction chld = {.sa_handler = on_child, .sa_flags = SA_NOCLDSTOP};
  sigemptyset(&chld.sa_mask);
  sigaction(SIGCHLD, &chld, NULL);
  sigprocmask(SIG_SETMASK, &old, NULL);
  /* One loop serves the bridges (a relaying child per connection) and reaps every child, the
     agent's orphans included, until the agent itself has exited. */
  struct pollfd fds[MAX_BRIDGES + 1];
  for (int b = 0; b < count; b++) fds[b] = (struct pollfd){listeners[b], POLLIN, 0};
  fds[count] = (struct pollfd){wake[0], POLLIN, 0};
  for (;;) {
    int status;
    pid_t pid;
    while ((pid = waitpid(-1, &status, WNOHANG)) > 0) {
      if (pid != child) continue;
      char line[32];
      int code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      int len = WIFEXITED(status) ? snprintf(line, sizeof line, "exit %d\n", code) : snprintf(line, sizeof line, "signal %d\n", WTERMSIG(status));
      if (status_fd >= 0 && write(status_fd, line, len) < 0) { /* the host reads the exit code instead */ }
      return code;
    }
    if (pid < 0 && errno != EINTR) return 126; /* ECHILD: no child at all, cannot happen while the agent runs */
    if (poll(fds, count + 1, -1) < 0) {
      if (errno == EINTR) continue;
      return 126;
    }
    if (fds[count].revents & POLLIN) {
      char drain[64];
      while (read(wake[0], drain, sizeof drain) > 0) {}
    }
    for (int b = 0; b < count; b++)
      if (fds[b].revents & POLLIN) accept_bridge(listeners[b], sockets[b], count, listeners);
  }
}

struct ll_ruleset_attr { uint64_t handled_access_fs, handled_access_net, scoped; };
struct ll_path_beneath_attr { uint64_t allowed_access; int32_t parent_fd; } __attribute__((packed));
struct ll_net_port_attr { uint64_t allowed_access, port; };
#ifndef SYS_landlock_create_ruleset
#define SYS_landlock_create_ruleset 444
#define SYS_landlock_add_rule 445
#define SYS_landlock_restrict_self 446
#endif
#define LL_FILE_BITS (1ULL << 0 | 1ULL << 1 | 1ULL << 2 | 1ULL << 14 | 1ULL << 15)
#define LL_READ (1ULL << 0 | 1ULL << 2 | 1ULL << 3)

static int landlock_abi(void) {
  long abi = syscall(SYS_landlock_create_ruleset, NULL, 0, 1U);
  return abi < 0 ? 0 : (int)abi;
}

static void add_path(int ruleset, const char *path, uint64_t access, uint64_t handled) {
  int fd = open(path, O_PATH | O_CLOEXEC);
  if (fd < 0) return; /* absent: nothing to allow */
  struct stat st;
  if (fstat(fd, &st) == 0 && !S_ISDIR(st.st_mode)) access &= LL_FILE_BITS;
  struct ll_path_beneath_attr rule = {.allowed_access = access & handled, .parent_fd = fd};
  if (syscall(SYS_landlock_add_rule, ruleset, 1, &rule, 0) < 0) die("landlock rule", path);
  close(fd);
}

static int run_landlock(int argc, char **argv) {
  int abi = landlock_abi();
  if (abi < 4) {
    fprintf(stderr, "sessiond-sandbox: Landlock ABI %d (4 needed)\n", abi);
    return 126;
  }
  uint64_t handled = (1ULL << 13) - 1; /* ABI 1 */
  handled |= 1ULL << 13 | 1ULL << 14;  /* REFER (2), TRUNCATE (3) */
  if (abi >= 5) handled |= 1ULL << 15; /* IOCTL_DEV */
  struct ll_ruleset_attr attr = {.handled_access_fs = handled, .handled_access_net = 1ULL << 1, .scoped = abi >= 6 ? 3 : 0};
  int ruleset = (int)syscall(SYS_landlock_create_ruleset, &attr, abi >= 6 ? sizeof attr : 16, 0);
  if (ruleset < 0) die("landlock_create_ruleset", NULL);
  int i = 2;
  for (; i < argc && strcmp(argv[i], "--") != 0; i++) {
    if (strcmp(argv[i], "--ro") == 0 && i + 1 < argc) add_path(ruleset, argv[++i], LL_READ, handled);
    else if (strcmp(argv[i], "--rw") == 0 && i + 1 < argc) add_path(ruleset, argv[++i], handled, handled);
    else if (strcmp(argv[i], "--dev") == 0 && i + 1 < argc) add_path(ruleset, argv[++i], LL_READ | 1ULL << 1 | 1ULL << 15, handled);
    /* Its own /proc/<pid> (the agent keeps this pid across exec), nobody else's. */
    else if (strcmp(argv[i], "--proc-self") == 0) add_path(ruleset, "/proc/self", LL_READ, handled);
    else if (strcmp(argv[i], "--port") == 0 && i + 1 < argc) {
      struct ll_net_port_attr rule = {.allowed_access = 1ULL << 1, .port = (uint64_t)atoi(argv[++i])};
      if (syscall(SYS_landlock_add_rule, ruleset, 2, &rule, 0) < 0) die("landlock port rule", argv[i]);
    } else {
      fprintf(stderr, "sessiond-sandbox: unknown landlock argument %s\n", argv[i]);
      return 126;
    }
  }
  if (i + 1 >= argc) {
    fprintf(stderr, "sessiond-sandbox: no command\n");
    return 126;
  }
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0) die("no_new_privs", NULL);
  if (syscall(SYS_landlock_restrict_self, ruleset, 0) < 0) die("landlock_restrict_self", NULL);
  close(ruleset);
  execvp(argv[i + 1], argv + i + 1);
  fprintf(stderr, "sessiond-sandbox: cannot run %s: %s\n", argv[i + 1], strerror(errno));
  return 127;
}

int main(int argc, char **argv) {
  if (argc >= 2 && strcmp(argv[1], "init") == 0) return run_init(argc, argv);
  if (argc >= 2 && strcmp(argv[1], "landlock") == 0) return run_landlock(argc, argv);
  if (argc >= 2 && strcmp(argv[1], "landlock-abi") == 0) {
    printf("%d\n", landlock_abi());
    return 0;
  }
  fprintf(stderr, "usage: sessiond-sandbox init|landlock|landlock-abi ...\n");
  return 2;
}
`;
