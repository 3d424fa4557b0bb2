/* tphreplay: two AXI DMAs in scatter-gather mode answering with recorded engine words, no
 * compute (tphloop.h; make host-bench's backend, generators/runtime/engines/replay.py's
 * replay_backend). The registers and descriptors behave as PG021 says for what the runtime
 * uses (generators/runtime/engines/regmodel.py models the rest: faults, SG errors, the PL behind it): a
 * transfer completes within the TAILDESC write, so DMASR reads Idle whenever the channel runs.
 */
#include "tphloop.h"

#include <string.h>

#include "tphfacts.h"

void tph_replay_init(tph_replay *dev, uint8_t *ddr, uint32_t phys_base, uint32_t size)
{
    uint32_t d, k;
    memset(dev, 0, sizeof *dev);
    dev->ddr = ddr;
    dev->phys_base = phys_base;
    dev->size = size;
    for (d = 0; d < 2; d++)
        for (k = 0; k < 2; k++)
            dev->ch[d][k].halted = 1;
}

uint32_t tph_replay_bytes(void) { return (uint32_t)sizeof(tph_replay); }

void tph_replay_record(tph_replay *dev, uint32_t port, const uint32_t *words,
                       const uint32_t *starts, uint32_t packets)
{
    if (port > 1)
        return;
    dev->words[port] = words;
    dev->starts[port] = starts;
    dev->packets[port] = packets;
    dev->next_packet[port] = 0;
}

/* the bytes at physical address a (n of them inside the span), else NULL */
static uint8_t *at(tph_replay *dev, uint32_t a, uint32_t n)
{
    uint32_t off = a - dev->phys_base;
    if (a < dev->phys_base || off > dev->size || n > dev->size - off)
        return NULL;
    return dev->ddr + (a - dev->phys_base);
}

static void put(uint8_t *desc, uint32_t word, uint32_t v)
{
    memcpy(desc + 4u * word, &v, 4);
}

static uint32_t get(const uint8_t *desc, uint32_t word)
{
    uint32_t v;
    memcpy(&v, desc + 4u * word, 4);
    return v;
}

/* the descriptors from the channel's position through the tail */
static void process(tph_replay *dev, uint32_t dma, uint32_t s2mm, uint32_t tail)
{
    tph_replay_ch *ch = &dev->ch[dma][s2mm];
    uint32_t a = ch->started ? ch->curdesc : ch->next, guard = dev->size / TPH_DESC_BYTES + 1u;
    ch->started = 0;
    while (guard--) {
        uint8_t *desc = at(dev, a, TPH_DESC_BYTES);
        uint32_t len;
        if (!desc || a % TPH_DESC_BYTES) {
            dev->errors++;
            ch->halted = 1;
            return;
        }
        len = get(desc, TPH_D_CONTROL) & TPH_LEN_MASK;
        if (!s2mm) {
            put(desc, TPH_D_STATUS, TPH_ST_CMPLT | len);
        } else if (dev->packets[dma]) {
            uint32_t k = dev->next_packet[dma], n = 4u * (dev->starts[dma][k + 1]
                                                        - dev->starts[dma][k]);
            uint32_t take = n < len ? n : len;
            uint8_t *buf = at(dev, get(desc, TPH_D_BUFFER), take);
            if (!buf) {
                dev->errors++;
                ch->halted = 1;
                return;
            }
            memcpy(buf, dev->words[dma] + dev->starts[dma][k], take);
            put(desc, TPH_D_STATUS, TPH_ST_CMPLT | TPH_ST_RXSOF | take
                                    | (take == n ? TPH_ST_RXEOF : 0u));
            dev->next_packet[dma] = k + 1 == dev->packets[dma] ? 0 : k + 1;
        }
        if (a == tail) {
            ch->next = get(desc, TPH_D_NXTDESC) & ~0x3Fu;
            return;
        }
        a = get(desc, TPH_D_NXTDESC) & ~0x3Fu;
    }
    dev->errors++;                    /* a ring that never reaches the tail */
    ch->halted = 1;
}

/* The channel a register access names (NULL: no such DMA) and the register's offset within
 * the channel's block (*r) and whether it is the S2MM channel (*s2mm). */
static tph_replay_ch *channel(tph_replay *dev, uint32_t dma, uint32_t offset, uint32_t *r,
                              uint32_t *s2mm)
{
    *s2mm = offset >= TPH_S2MM;
    *r = offset - (*s2mm ? TPH_S2MM : 0u);
    return dma > 1 ? NULL : &dev->ch[dma][*s2mm];
}

int32_t tph_replay_read(void *d, uint32_t dma, uint32_t offset, uint32_t *value)
{
    uint32_t r, s2mm;
    tph_replay_ch *ch = channel((tph_replay *)d, dma, offset, &r, &s2mm);
    if (!ch)
        return -1;
    if (r == TPH_DMACR)
        *value = ch->cr;
    else if (r == TPH_DMASR)
        *value = TPH_SR_SGINCLD | (ch->halted ? TPH_SR_HALTED : TPH_SR_IDLE);
    else if (r == TPH_CURDESC)
        *value = ch->curdesc;
    else if (r == TPH_TAILDESC || r == TPH_CURDESC_MSB || r == TPH_TAILDESC_MSB)
        *value = 0;
    else
        return -1;
    return 0;
}

int32_t tph_replay_write(void *d, uint32_t dma, uint32_t offset, uint32_t value)
{
    tph_replay *dev = (tph_replay *)d;
    uint32_t r, s2mm;
    tph_replay_ch *ch = channel(dev, dma, offset, &r, &s2mm);
    if (!ch)
        return -1;
    if (r == TPH_DMACR) {
        if (value & TPH_CR_RESET) {       /* both channels to power-on */
            memset(dev->ch[dma], 0, sizeof dev->ch[dma]);
            dev->ch[dma][0].halted = dev->ch[dma][1].halted = 1;
            return 0;
        }
        if ((value & TPH_CR_RS) && ch->halted) {
            ch->halted = 0;
            ch->started = 1;
        } else if (!(value & TPH_CR_RS)) {
            ch->halted = 1;
        }
        ch->cr = value & ~TPH_CR_RESET;
    } else if (r == TPH_CURDESC) {
        if (ch->halted)
            ch->curdesc = value & ~0x3Fu;
    } else if (r == TPH_TAILDESC) {
        if (!ch->halted)
            process(dev, dma, s2mm, value & ~0x3Fu);
    } else if (r != TPH_DMASR && !((r == TPH_CURDESC_MSB || r == TPH_TAILDESC_MSB) && !value)) {
        return -1;
    }
    return 0;
}
