/* micro: kern_attention_group_rows on a paged KV like qwen35-small-code (2 KV heads, 128 dims, pages of 64),
   one thread per KV head (2 threads) or 1 thread, N positions, 3 queries per head */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/mman.h>
#include <immintrin.h>
#include "../../work/main/src/kernels/attention.h"
#include "../../work/main/src/kernels/threadpool.h"
static double now(void){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec+t.tv_nsec*1e-9;}
enum { D = 128, PS = 64, NKV = 2, NQ = 3 };
static int N, NP; static float *K, *V; static int32_t *pages;
typedef struct { int h; float *out[NQ]; const float *q[NQ]; float *scores; } job;
static job *JB;
static void *run(void *a);
static void task(void *c, int i, int n){ (void)c; (void)n; run(&JB[i]); }
static void *run(void *a) {
  job *j = a; int n[NQ]; for (int i=0;i<NQ;i++) n[i]=N;
  kern_rows kr = {K + (size_t)j->h*PS*D, pages, (long)NKV*PS*D, 6, D}, vr = {V + (size_t)j->h*PS*D, pages, (long)NKV*PS*D, 6, D};
  if (getenv("PLAIN")) { __m512 a=_mm512_setzero_ps(), b=a;
    for (int p=0;p<NP;p++) { const float *k0 = kern_row(&kr, p*PS), *v0 = kern_row(&vr, p*PS);
      for (int i=0;i<PS*D;i+=32) { a=_mm512_add_ps(a,_mm512_loadu_ps(k0+i)); b=_mm512_add_ps(b,_mm512_loadu_ps(k0+i+16)); } 
      for (int i=0;i<PS*D;i+=32) { a=_mm512_add_ps(a,_mm512_loadu_ps(v0+i)); b=_mm512_add_ps(b,_mm512_loadu_ps(v0+i+16)); } }
    j->out[0][0] = _mm512_reduce_add_ps(_mm512_add_ps(a,b)); return NULL; }
  kern_attention_group_rows(j->out, j->q, n, NQ, &kr, D, &vr, D, 0.088f, j->scores, N);
  return NULL;
}
int main(int argc, char **argv) {
  N = atoi(argv[1]); int reps = atoi(argv[2]); int layers = 24; /* distinct KV buffers so it comes from DRAM */
  NP = N / PS; size_t fl = (size_t)NP*NKV*PS*D;
  float *KB = mmap(0, fl*4*layers, PROT_READ|PROT_WRITE, MAP_PRIVATE|MAP_ANONYMOUS, -1, 0), *VB = mmap(0, fl*4*layers, PROT_READ|PROT_WRITE, MAP_PRIVATE|MAP_ANONYMOUS, -1, 0);
  madvise(KB, fl*4*layers, MADV_HUGEPAGE); madvise(VB, fl*4*layers, MADV_HUGEPAGE);
  for (size_t i=0;i<fl*layers;i++){KB[i]=(float)((i*2654435761u)>>24)/256.f-0.5f; VB[i]=(float)((i*40503u)>>8&255)/256.f;}
  pages = malloc(NP*4); for (int i=0;i<NP;i++) pages[i]=i; /* shuffled? keep in order */
  if (argc > 3 && atoi(argv[3])) for (int i=NP-1;i>0;i--){int r=rand()%(i+1); int t=pages[i]; pages[i]=pages[r]; pages[r]=t;}
  job jb[NKV]; float qs[NKV][NQ][D], outs[NKV][NQ][D];
  for (int h=0;h<NKV;h++){ jb[h].h=h; jb[h].scores=malloc((size_t)NQ*N*4); for(int i=0;i<NQ;i++){ for(int d=0;d<D;d++) qs[h][i][d]=(float)((h*7+i*3+d)%11)/11.f; jb[h].q[i]=qs[h][i]; jb[h].out[i]=outs[h][i]; } }
  double best = 1e9, sum=0;
  for (int r=0;r<reps;r++){ for (int l=0;l<layers;l++){ K=KB+fl*l; V=VB+fl*l;
    double t=now(); JB=jb; tpool_run(tpool_global(), NKV, task, 0); t=now()-t; if(t<best)best=t; sum+=t; } }
  double bytes = (double)fl*2*4;
  printf("N=%d: best %.1f us (%.1f GB/s), mean %.1f us (%.1f GB/s)  chk %g\n", N, best*1e6, bytes/best/1e9, sum/reps/layers*1e6, bytes/(sum/reps/layers)/1e9, outs[0][0][0]+outs[1][2][5]);
}
