/* The floor of row d: the system calls of nagents' walk of a tree and nothing else, on N threads.
 * Each thread takes the root's folders one at a time from a shared counter and walks each one
 * depth-first, as `skillcat check` does: open every folder beneath its parent (O_NOFOLLOW), list
 * it to the end (getdents64 until it returns 0), open, read and close its SKILL.md when it lists
 * one as a regular file (one read, which a SKILL.md of up to 16 KiB leaves short: the end of the
 * file), enter its subfolders, close it. No parsing, sorting, allocation per entry or output:
 * what is left is the kernel's work for the calls the walk makes, its floor on this machine.
 * Prints the wall time of each run after one that warms the page cache, then the median.
 *
 *   cc -O2 -pthread -o /tmp/walk_floor bench/walk_floor.c && /tmp/walk_floor TREE [THREADS] [RUNS]
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

struct linux_dirent64 {
    uint64_t d_ino;
    int64_t d_off;
    unsigned short d_reclen;
    unsigned char d_type;
    char d_name[];
};

struct counts {
    long folders, entries, skills;
};

static int root_fd;
static char **top_names;
static int top_count;
static int next_top;

static double now_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

static int is_dot(const char *name) {
    return name[0] == '.' && (name[1] == 0 || (name[1] == '.' && name[2] == 0));
}

/* Lists the open folder `fd` to the end; returns its subfolders' names, NUL-separated, in `*dirs`. */
static size_t list(int fd, char *buffer, size_t size, char **dirs, size_t *dirs_len, int *skill, long *entries) {
    size_t count = 0, used = 0, capacity = 256;
    *dirs = malloc(capacity);
    *skill = 0;
    for (;;) {
        long got = syscall(SYS_getdents64, fd, buffer, size);
        if (got <= 0)
            break;
        for (long offset = 0; offset < got;) {
            struct linux_dirent64 *entry = (void *)(buffer + offset);
            offset += entry->d_reclen;
            if (is_dot(entry->d_name))
                continue;
            (*entries)++;
            if (entry->d_type == DT_REG && strcmp(entry->d_name, "SKILL.md") == 0)
                *skill = 1;
            if (entry->d_type == DT_DIR) {
                size_t length = strlen(entry->d_name) + 1;
                while (used + length > capacity)
                    *dirs = realloc(*dirs, capacity *= 2);
                memcpy(*dirs + used, entry->d_name, length);
                used += length;
                count++;
            }
        }
    }
    *dirs_len = used;
    return count;
}

static void walk(int parent, const char *name, char *buffer, char *content, struct counts *counts) {
    int fd = openat(parent, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
        return;
    counts->folders++;
    char *dirs;
    size_t dirs_len;
    int skill;
    list(fd, buffer, 32768, &dirs, &dirs_len, &skill, &counts->entries);
    if (skill) {
        int file = openat(fd, "SKILL.md", O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
        if (file >= 0 && read(file, content, 16384) > 0)
            counts->skills++;
        if (file >= 0)
            close(file);
    }
    for (size_t at = 0; at < dirs_len; at += strlen(dirs + at) + 1)
        walk(fd, dirs + at, buffer, content, counts);
    free(dirs);
    close(fd);
}

static void *serve(void *result) {
    char *buffer = malloc(32768), *content = malloc(16384);
    struct counts *counts = result;
    for (;;) {
        int index = __atomic_fetch_add(&next_top, 1, __ATOMIC_RELAXED);
        if (index >= top_count)
            break;
        walk(root_fd, top_names[index], buffer, content, counts);
    }
    free(buffer);
    free(content);
    return NULL;
}

static int by_value(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv) {
    if (argc < 2 || argc > 4) {
        fprintf(stderr, "usage: %s TREE [THREADS] [RUNS]\n", argv[0]);
        return 2;
    }
    int threads = argc > 2 ? atoi(argv[2]) : 2, runs = argc > 3 ? atoi(argv[3]) : 11;
    if (threads < 1 || threads > 64 || runs < 1 || runs > 1000) {
        fprintf(stderr, "THREADS must be 1 to 64, RUNS 1 to 1000\n");
        return 2;
    }
    double *times = calloc(runs, sizeof *times);
    for (int run = -1; run < runs; run++) {
        double start = now_ms();
        /* The root is listed as the walk lists it; its subfolders are shared out. */
        root_fd = open(argv[1], O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (root_fd < 0) {
            perror(argv[1]);
            return 1;
        }
        static char buffer[32768];
        char *dirs;
        size_t dirs_len;
        int skill;
        struct counts total = {1, 0, 0};
        top_count = (int)list(root_fd, buffer, sizeof buffer, &dirs, &dirs_len, &skill, &total.entries);
        top_names = calloc(top_count + 1, sizeof *top_names);
        size_t at = 0;
        for (int index = 0; index < top_count; index++, at += strlen(dirs + at) + 1)
            top_names[index] = dirs + at;
        next_top = 0;
        pthread_t workers[64];
        struct counts counts[64];
        memset(counts, 0, sizeof counts);
        for (int index = 0; index < threads; index++)
            pthread_create(&workers[index], NULL, serve, &counts[index]);
        for (int index = 0; index < threads; index++) {
            pthread_join(workers[index], NULL);
            total.folders += counts[index].folders;
            total.entries += counts[index].entries;
            total.skills += counts[index].skills;
        }
        close(root_fd);
        free(top_names);
        free(dirs);
        double elapsed = now_ms() - start;
        if (run < 0) {
            printf("%ld folders, %ld entries, %ld SKILL.md read; %d thread%s\n", total.folders, total.entries,
                   total.skills, threads, threads == 1 ? "" : "s");
            continue;
        }
        times[run] = elapsed;
        printf("%.1f ms\n", elapsed);
    }
    qsort(times, runs, sizeof *times, by_value);
    printf("median %.1f ms\n", times[runs / 2]);
    return 0;
}
