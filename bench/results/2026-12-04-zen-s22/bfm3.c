#define _GNU_SOURCE
#include <immintrin.h>
#include <stdio.h>
#include <stdlib.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <pthread.h>
#define TGT __attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16,fma")))
static double now(void){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec+t.tv_nsec*1e-9;}
#define K 2048
static size_t NB = (size_t)512<<20;
#define DP2(a,w) a=_mm512_dpbf16_ps(_mm512_dpbf16_ps(a,w,xh),w,xl)
TGT static float run(const uint16_t *W, size_t nbytes, int mode, const uint16_t *x, int pfd) {
  __m512 a0=_mm512_setzero_ps(),a1=a0,a2=a0,a3=a0,b0=a0,b1=a0,b2=a0,b3=a0;
  size_t rows = nbytes / (K*2);
  __m512bh xh=(__m512bh)_mm512_loadu_si512(x), xl=(__m512bh)_mm512_loadu_si512(x+32);
  if (mode==0||mode==2) {
    const char *p=(const char*)W, *e=p+nbytes;
    for (; p<e; p+=256) {
      if (pfd) _mm_prefetch(p+pfd, _MM_HINT_T0), _mm_prefetch(p+pfd+128, _MM_HINT_T0);
      __m512bh w0=(__m512bh)_mm512_load_si512(p),w1=(__m512bh)_mm512_load_si512(p+64),w2=(__m512bh)_mm512_load_si512(p+128),w3=(__m512bh)_mm512_load_si512(p+192);
      if(mode==0){a0=_mm512_add_ps(a0,(__m512)w0);a1=_mm512_add_ps(a1,(__m512)w1);a2=_mm512_add_ps(a2,(__m512)w2);a3=_mm512_add_ps(a3,(__m512)w3);}
      else{DP2(a0,w0);DP2(a1,w1);DP2(a2,w2);DP2(a3,w3);}
    }
  } else {
    for (size_t r=0;r<rows;r+=4){
      const uint16_t *w[4]; for(int i=0;i<4;i++) w[i]=W+(r+i)*K;
      for (int s=0;s<K;s+=32){
        if (pfd) for(int i=0;i<4;i++) _mm_prefetch((const char*)(w[i]+s)+pfd,_MM_HINT_T0);
        __m512bh w0=(__m512bh)_mm512_load_si512(w[0]+s),w1=(__m512bh)_mm512_load_si512(w[1]+s),w2=(__m512bh)_mm512_load_si512(w[2]+s),w3=(__m512bh)_mm512_load_si512(w[3]+s);
        if(mode==3){a0=_mm512_add_ps(a0,(__m512)w0);a1=_mm512_add_ps(a1,(__m512)w1);a2=_mm512_add_ps(a2,(__m512)w2);a3=_mm512_add_ps(a3,(__m512)w3);}
        else if(mode==4){a0=_mm512_dpbf16_ps(a0,w0,xh);a1=_mm512_dpbf16_ps(a1,w1,xh);a2=_mm512_dpbf16_ps(a2,w2,xh);a3=_mm512_dpbf16_ps(a3,w3,xh);
                         b0=_mm512_dpbf16_ps(b0,w0,xl);b1=_mm512_dpbf16_ps(b1,w1,xl);b2=_mm512_dpbf16_ps(b2,w2,xl);b3=_mm512_dpbf16_ps(b3,w3,xl);}
        else{DP2(a0,w0);DP2(a1,w1);DP2(a2,w2);DP2(a3,w3);}
      }
    }
  }
  return _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(_mm512_add_ps(a0,a1),_mm512_add_ps(a2,a3)),_mm512_add_ps(_mm512_add_ps(b0,b1),_mm512_add_ps(b2,b3))));
}
typedef struct {const uint16_t*W; size_t nb; int m,pf; const uint16_t*x;} targ;
static void*thr(void*a){targ*t=a; volatile float s=run(t->W,t->nb,t->m,t->x,t->pf); (void)s; return NULL;}
static int cmp(const void*a,const void*b){double x=*(double*)a,y=*(double*)b;return x<y?-1:x>y;}
int main(int argc,char**argv){
  uint16_t *W = mmap(NULL,NB,PROT_READ|PROT_WRITE,MAP_PRIVATE|MAP_ANONYMOUS,-1,0);
  madvise(W,NB,MADV_HUGEPAGE);
  for(size_t i=0;i<NB/2;i++) W[i]=(uint16_t)(0x3f80+(i*2654435761u>>28));
  uint16_t x[64]; for(int i=0;i<64;i++) x[i]=0x3f80;
  struct {const char*n;int m,pf;} cf[]={{"plain add contig",0,0},{"contig dp2",2,0},{"4rows add",3,0},{"4rows dp2 (kernel)",1,0},{"4rows dp split acc",4,0},
     {"4rows dp2 pf+512",1,512},{"4rows dp2 pf+1024",1,1024},{"4rows dp2 pf+2048",1,2048},{"contig dp2 pf+2048",2,2048},{"contig dp2 pf+4096",2,4096}};
  int nc=sizeof cf/sizeof cf[0], R=atoi(argc>1?argv[1]:"7");
  double res[16][32];
  for(int rep=0;rep<R;rep++) for(int c=0;c<nc;c++){ double t=now(); pthread_t th; targ a1={W,NB/2,cf[c].m,cf[c].pf,x}, a2={W+NB/4,NB/2,cf[c].m,cf[c].pf,x};
   pthread_create(&th,NULL,thr,&a2); thr(&a1); pthread_join(th,NULL); res[c][rep]=NB/(now()-t)/1e9; }
  for(int c=0;c<nc;c++){ qsort(res[c],R,sizeof(double),cmp); printf("%-22s median %5.1f  min %5.1f max %5.1f GB/s\n",cf[c].n,res[c][R/2],res[c][0],res[c][R-1]); }
}
