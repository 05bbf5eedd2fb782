/* One hostile tool of the attack suite (crates/quiver-cli/tests/attacks.rs): `probe MODE`
 * tries one class of attack and prints what it got as one JSON object on stdout. The test
 * compiles it with the paths and the canary of its run as macros (STATE_DB, HOME_DIR,
 * CONFIG_FILE, VICTIM_FILE, SECRET_FILE, CANARY_SOCK). */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#ifndef AF_VSOCK
#define AF_VSOCK 40
#endif

static void field_errno(const char *name, long result, int last) {
    printf("\"%s\": %d%s", name, result < 0 ? errno : 0, last ? "" : ", ");
}

/* The first bytes of `path` (quotes and control bytes dropped), or the errno. */
static void field_read(const char *name, const char *path, int last) {
    char buf[256] = {0};
    int fd = open(path, O_RDONLY);
    if (fd < 0) {
        printf("\"%s\": %d%s", name, errno, last ? "" : ", ");
        return;
    }
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    for (ssize_t i = 0; i < n; i++)
        if (buf[i] == '"' || buf[i] == '\\' || (unsigned char)buf[i] < 32) buf[i] = ' ';
    printf("\"%s\": \"%s\"%s", name, n > 0 ? buf : "", last ? "" : ", ");
}

static int sockets(void) {
    char params[120] = {0};
    printf("{");
    field_errno("io_uring_setup", syscall(__NR_io_uring_setup, 8, params), 0);
    int families[] = {AF_UNIX, AF_VSOCK, AF_NETLINK, AF_PACKET, AF_INET, AF_INET6};
    const char *names[] = {"unix", "vsock", "netlink", "packet", "inet", "inet6"};
    for (int i = 0; i < 6; i++) {
        int fd = socket(families[i], families[i] == AF_NETLINK || families[i] == AF_PACKET ? SOCK_RAW : SOCK_STREAM, 0);
        field_errno(names[i], fd, 0);
        if (fd >= 0 && families[i] == AF_UNIX) {
            struct sockaddr_un addr = {.sun_family = AF_UNIX};
            strncpy(addr.sun_path, CANARY_SOCK, sizeof addr.sun_path - 1);
            char buf[128] = {0};
            if (connect(fd, (struct sockaddr *)&addr, sizeof addr) == 0 && read(fd, buf, sizeof buf - 1) > 0)
                printf("\"unix_read\": \"%s\", ", buf);
        }
    }
#ifdef __x86_64__
    field_errno("x32_socket", syscall(0x40000000 | __NR_socket, AF_UNIX, SOCK_STREAM, 0), 1);
#else
    printf("\"x32_socket\": 1");
#endif
    printf("}\n");
    return 0;
}

/* The i386 entry: socketcall-free `socket` (359) through int 0x80; the filter kills it. */
static int i386(void) {
#ifdef __x86_64__
    long result;
    __asm__ volatile("int $0x80" : "=a"(result) : "a"(359), "b"(AF_UNIX), "c"(SOCK_STREAM), "d"(0) : "memory");
    printf("{\"survived\": true, \"result\": %ld}\n", result);
#else
    printf("{\"survived\": false}\n");
#endif
    return 0;
}

static int caps(void) {
    char line[256];
    FILE *status = fopen("/proc/self/status", "r");
    printf("{");
    while (status && fgets(line, sizeof line, status)) {
        unsigned long long value;
        char name[32];
        if (sscanf(line, "Cap%31[^:]: %llx", name, &value) == 2) printf("\"Cap%s\": %llu, ", name, value);
        if (sscanf(line, "NoNewPrivs: %llu", &value) == 1) printf("\"NoNewPrivs\": %llu, ", value);
    }
    if (status) fclose(status);
    field_read("secret", SECRET_FILE, 0);
    field_errno("chmod_secret", chmod(SECRET_FILE, 0666), 1);
    printf("}\n");
    return 0;
}

static int view(void) {
    struct stat st;
    int procs = 0;
    DIR *proc = opendir("/proc");
    struct dirent *entry;
    while (proc && (entry = readdir(proc)))
        if (entry->d_name[0] >= '0' && entry->d_name[0] <= '9') procs++;
    if (proc) closedir(proc);
    printf("{");
    field_errno("stat_state_db", stat(STATE_DB, &st), 0);
    field_errno("stat_home", stat(HOME_DIR, &st), 0);
    field_errno("stat_config", stat(CONFIG_FILE, &st), 0);
    field_errno("stat_root_home", stat("/root", &st), 0);
    field_read("victim", VICTIM_FILE, 0);
    field_read("config", CONFIG_FILE, 0);
    int fd = open(VICTIM_FILE, O_WRONLY | O_TRUNC);
    field_errno("write_victim", fd, 0);
    if (fd >= 0) close(fd);
    printf("\"processes\": %d, \"host\": [", procs);
    const char *host[] = {"/work", "/home", "/var", "/root", "/opt", "/srv", "/mnt", "/boot",
                          "/sys", "/run", "/etc/shadow", "/etc/hostname", "/dev/sda", "/dev/vda"};
    int first = 1;
    for (unsigned i = 0; i < sizeof host / sizeof host[0]; i++)
        if (stat(host[i], &st) == 0) {
            printf("%s\"%s\"", first ? "" : ", ", host[i]);
            first = 0;
        }
    printf("]}\n");
    return 0;
}

static int fds(void) {
    printf("{\"open\": [");
    int first = 1;
    for (int fd = 3; fd < 1024; fd++)
        if (fcntl(fd, F_GETFD) >= 0) {
            printf("%s%d", first ? "" : ", ", fd);
            first = 0;
        }
    char buf[128] = {0};
    ssize_t n = read(9, buf, sizeof buf - 1);
    for (ssize_t i = 0; i < n; i++)
        if (buf[i] == '"' || buf[i] == '\\' || (unsigned char)buf[i] < 32) buf[i] = ' ';
    printf("], \"fd9\": \"%s\"}\n", n > 0 ? buf : "");
    return 0;
}

/* Forks until the kernel says no (or `cap` children), children sleeping `hold` seconds. */
static int forks(int cap, int hold) {
    int count = 0;
    for (; count < cap; count++) {
        pid_t pid = fork();
        if (pid < 0) break;
        if (pid == 0) {
            sleep(hold);
            _exit(0);
        }
    }
    printf("{\"forked\": %d, \"errno\": %d}\n", count, count < cap ? errno : 0);
    fflush(stdout);
    return count;
}

static int memory(void) {
    for (int i = 0; i < 4; i++)
        if (fork() == 0) {
            size_t size = 400u << 20;
            volatile char *block = malloc(size);
            for (size_t at = 0; block && at < size; at += 4096) block[at] = 1;
            sleep(2);
            _exit(0);
        }
    while (wait(NULL) > 0) {}
    printf("{\"survived\": true}\n");
    return 0;
}

/* Writes 1 MiB files into `dir` until an error or `max` MiB. */
static int fill(const char *dir, int max) {
    static char chunk[1 << 20];
    memset(chunk, 7, sizeof chunk);
    int written = 0;
    for (; written < max; written++) {
        char path[512];
        snprintf(path, sizeof path, "%s/fill-%d", dir, written);
        int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        if (fd < 0 || write(fd, chunk, sizeof chunk) != (ssize_t)sizeof chunk) {
            if (fd >= 0) close(fd);
            break;
        }
        close(fd);
    }
    printf("{\"mib\": %d, \"errno\": %d}\n", written, written < max ? errno : 0);
    return 0;
}

int main(int argc, char **argv) {
    const char *mode = argc > 1 ? argv[1] : "normal";
    setvbuf(stdout, NULL, _IOFBF, 1 << 16);
    if (!strcmp(mode, "sockets")) return sockets();
    if (!strcmp(mode, "i386")) return i386();
    if (!strcmp(mode, "caps")) return caps();
    if (!strcmp(mode, "view")) return view();
    if (!strcmp(mode, "fds")) return fds();
    if (!strcmp(mode, "uid")) {
        printf("{\"uid\": %d, \"gid\": %d}\n", getuid(), getgid());
        return 0;
    }
    if (!strcmp(mode, "hog")) {
        forks(100000, 6);
        sleep(4);
        return 0;
    }
    if (!strcmp(mode, "forker")) {
        forks(20, 0);
        while (wait(NULL) > 0) {}
        return 0;
    }
    if (!strcmp(mode, "pids")) {
        forks(100000, 3);
        return 0;
    }
    if (!strcmp(mode, "memory")) return memory();
    if (!strcmp(mode, "disk")) return fill(".", 400);
    if (!strcmp(mode, "tmp")) return fill("/tmp", 200);
    if (!strcmp(mode, "sleep")) {
        sleep(2);
        printf("{\"slept\": true}\n");
        return 0;
    }
    printf("{\"ok\": true}\n");
    return 0;
}
