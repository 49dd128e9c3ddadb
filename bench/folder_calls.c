/* The kernel's part of row d, call by call: for each skill folder of a tree made by
 * bench/discovery_ratio.py's builder (ROOT/team-XX/skill-NNNNN, 100 skills a team), the calls the
 * walk makes for it, on one thread, each timed: open the folder, list it (two getdents64, the
 * second finding the end), open SKILL.md, fstat, read, close both. Prints the mean of each call in
 * nanoseconds over the skills, and their sum per skill.
 *
 *   cc -O2 -o /tmp/folder_calls bench/folder_calls.c && /tmp/folder_calls ROOT 10000
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static double now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e9 + t.tv_nsec;
}

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: %s ROOT SKILLS\n", argv[0]);
        return 2;
    }
    int skills = atoi(argv[2]);
    int root = open(argv[1], O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (root < 0) {
        perror(argv[1]);
        return 1;
    }
    static char buffer[32768];
    const char *names[] = {"open folder", "getdents64", "getdents64 (end)", "open SKILL.md", "fstat", "read",
                           "close SKILL.md", "close folder"};
    double spent[8] = {0};
    for (int index = 0; index < skills; index++) {
        char path[64];
        snprintf(path, sizeof path, "team-%02d/skill-%05d", index / 100, index);
        double t[9];
        t[0] = now_ns();
        int folder = openat(root, path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        t[1] = now_ns();
        long listed = syscall(SYS_getdents64, folder, buffer, sizeof buffer);
        t[2] = now_ns();
        long end = syscall(SYS_getdents64, folder, buffer, sizeof buffer);
        t[3] = now_ns();
        int file = openat(folder, "SKILL.md", O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
        t[4] = now_ns();
        struct stat status;
        int stated = fstat(file, &status);
        t[5] = now_ns();
        ssize_t read_bytes = read(file, buffer, sizeof buffer);
        t[6] = now_ns();
        close(file);
        t[7] = now_ns();
        close(folder);
        t[8] = now_ns();
        if (folder < 0 || listed <= 0 || end != 0 || file < 0 || stated != 0 || read_bytes <= 0) {
            fprintf(stderr, "%s/%s: not a folder with a SKILL.md\n", argv[1], path);
            return 1;
        }
        for (int call = 0; call < 8; call++) spent[call] += t[call + 1] - t[call];
    }
    double total = 0;
    for (int call = 0; call < 8; call++) {
        printf("%-17s %6.0f ns\n", names[call], spent[call] / skills);
        total += spent[call] / skills;
    }
    printf("%-17s %6.0f ns per skill folder; %.1f ms for %d on one core\n", "sum", total, total * skills / 1e6, skills);
    return 0;
}
